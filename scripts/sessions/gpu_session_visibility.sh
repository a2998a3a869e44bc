#!/usr/bin/env bash
# One call (2026-11-30 late night): the library built with -fvisibility=hidden (only the C ABI exported) against the
# previous build (build/base/libfa3nn_hopper.so: default visibility, generic loads/stores in the 64-row backward
# kernels) in one process, which failed with "invalid argument" in the previous call; the forward and backward GPU
# tests on the new build; the d128 backward default's same-run A/B (explicit LDS/STS vs generic). Needs both
# libraries carried.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-visibility
stamp backward timing
timeout 150 python scripts/hopper_bwd_device_check.py --variants bulk_dq_overlap --headdims 128 \
    --seqlens 2048 16384 --compare base=build/base/libfa3nn_hopper.so > "$out/bwd_check.log" 2>&1
echo "bwd check rc $?"; grep -E "FAIL" "$out/bwd_check.log"; sed -n '/^| hdim/,$p' "$out/bwd_check.log"
stamp tests
timeout 170 python -m pytest -m gpu -n 8 -v -rfE -p no:cacheprovider tests/test_hopper_bwd.py tests/test_hopper.py \
    > "$out/tests.log" 2>&1
echo "tests rc $?"; gpu_log_summary "$out/tests.log"
stamp done
gpu_archive visibility.tgz
