#!/usr/bin/env bash
# One device call for the d64 backward with 128-row query blocks (variant m128, flash_bwd.cuh): the whole backward
# test file (every variant: the workspaces' padding unit went from 64 to 128 rows for all of them) and the API tests
# that train through it, then backward timing of bulk_dq (the d64 default) and m128 beside cuDNN and Triton at
# seqlen 512-16384 (scripts/hopper_bwd_device_check.py). Needs build/libfa3nn_hopper.so carried. One archive.
#
#   bash scripts/gpu_bwd_m128.sh
set -u
source "$(dirname "$0")/gpu_env.sh"
gpu_setup /tmp/fa3nn-bwd-m128

stamp tests
timeout 240 python -m pytest -m gpu -n 8 -v -rfE -p no:cacheprovider tests/test_hopper_bwd.py tests/test_api.py \
    tests/test_ops_and_compile.py > "$out/tests.log" 2>&1
echo "tests rc $?"; gpu_log_summary "$out/tests.log"

stamp backward timing
timeout 240 python scripts/hopper_bwd_device_check.py --variants bulk_dq m128 --headdims 64 \
    --seqlens 512 1024 2048 8192 16384 > "$out/bwd_check.log" 2>&1
echo "bwd check rc $?"; grep -E "FAIL" "$out/bwd_check.log"; sed -n '/^| hdim/,$p' "$out/bwd_check.log"
stamp done
gpu_archive bwd_m128.tgz
