#!/usr/bin/env bash
# First GPU call of the thirty-sixth session (carry build/libfa3nn_hopper.so, main's library): the GPU tests of
# patch_hf's mask paths (this session's, never run on a GPU) and the one-pass sinks correction (thirty-fifth session,
# never run on a GPU): its GPU tests and its cost against the plain call
# (scripts/fa3_compat_bench.py; before the rewrite 1.13-1.18x at 16k, 1.46-1.63x at 4k; predicted now <= 1.05x at
# 16k, <= 1.15x at 4k: one read and one write of out per direction against an attention call of 3-4 ms at 16k), then
# the varlen softcap A/B of scripts/sessions/gpu_session_s33c.sh (native against Triton, cap 30, +- window 1024).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s36a
stamp start
gpu_pytest fa3_compat_tests.log 120 tests/test_fa3_compat.py tests/test_hf.py tests/test_hf_mask_probe.py
grep -E "^(FAILED|ERROR) " "$out/fa3_compat_tests.log" | head -n 10
stamp tests
timeout 150 python scripts/fa3_compat_bench.py --json "$out/fa3_compat.json" > "$out/fa3_compat.log" 2>&1
echo "bench rc $?"; tail -n 30 "$out/fa3_compat.log"
stamp bench
bash "$(dirname "$0")/gpu_session_s33c.sh"  # the varlen softcap A/B, into the same $OUT
