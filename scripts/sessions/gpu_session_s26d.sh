#!/usr/bin/env bash
# 2026-12-04 (twenty-sixth session): the native backward's preprocess / postprocess with 16-byte accesses (one lane
# per 8 elements; the old kernels load 2 bytes and store 4 per access). s26c's table has the d128 backward at 0.84x
# cuDNN at 512-1k keys, where these two memory-bound passes over 16k tokens are a fixed share. Every native backward
# test, then the A/B (scripts/bwd_prepost_ab.py: whole backward, 7 interleaved rounds, per-kernel times). Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s26d
stamp tests
gpu_pytest tests_bwd.log 240 tests/test_hopper_bwd.py
grep -E "^(FAILED|ERROR)|assert" "$out/tests_bwd.log" | head -n 12
stamp ab
timeout 300 python scripts/bwd_prepost_ab.py --json "$out/prepost.json" > "$out/prepost.log" 2>&1
echo "ab rc $?"; sed -n '/^| d /,$p' "$out/prepost.log"
stamp done
