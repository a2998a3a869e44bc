#!/usr/bin/env bash
# 2026-12-04 (twenty-ninth session, first call): the native backward on packed (varlen) batches. Every native
# backward test (the new varlen cases: empty sequences, unequal lengths, GQA, per-tile and persistent launches), the
# hopper / dispatch tests that route varlen, every other backward / gradient test; then scripts/bwd_varlen_ab.py: the
# dense kernels against main's build (build/base, carried; their SASS changed by a few instructions) and varlen
# native x Triton x dense native. Carry build (with build/base/libfa3nn_hopper.so built from main).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s29a
stamp tests
gpu_pytest tests_bwd.log 240 tests/test_hopper_bwd.py
grep -E "^(FAILED|ERROR)" "$out/tests_bwd.log" | head -n 12
gpu_pytest tests_api.log 240 tests/test_hopper.py tests/test_dispatch.py tests/test_varlen_and_gradcheck.py
grep -E "^(FAILED|ERROR)" "$out/tests_api.log" | head -n 12
gpu_pytest tests_grad.log 200 tests/ -k "backward or grad or bwd or train" --ignore=tests/test_hopper_bwd.py \
    --ignore=tests/test_hopper.py
grep -E "^(FAILED|ERROR)" "$out/tests_grad.log" | head -n 12
stamp ab
timeout 300 python scripts/bwd_varlen_ab.py --base build/base/libfa3nn_hopper.so --rounds 5 \
    --json "$out/varlen_ab.json" > "$out/varlen_ab.log" 2>&1
echo "ab rc $?"; sed -n '/^| d /,$p' "$out/varlen_ab.log"; tail -n 3 "$out/varlen_ab.log"
stamp done
