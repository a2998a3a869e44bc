#!/usr/bin/env bash
# One call on a 2-GPU host (2026-11-30 late night): (1) the backward GPU tests on the candidate build (explicit
# LDS/STS in every backward kernel); (2) backward timing of the defaults (d64 m128, d128 bulk_dq_overlap) against
# the previous build (build/base/libfa3nn_hopper.so, generic loads/stores in the 64-row kernels) and cuDNN;
# (3) issue 7's llama-1b pair on 2 GPUs with FSDP2 (fa3nn, sdpa; FP8 left out), 70 steps each.
# Needs build/libfa3nn_hopper.so, build/base/libfa3nn_hopper.so and the .whl/ wheels carried.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-m128-pair
gpu_wheels /tmp/site "*.whl"
stamp tests
CUDA_VISIBLE_DEVICES=0 timeout 120 python -m pytest -m gpu -n 8 -v -rfE -p no:cacheprovider tests/test_hopper_bwd.py \
    > "$out/tests.log" 2>&1
echo "tests rc $?"; gpu_log_summary "$out/tests.log"
stamp backward timing
CUDA_VISIBLE_DEVICES=0 timeout 150 python scripts/hopper_bwd_device_check.py --variants bulk_dq_overlap m128 \
    --headdims 128 64 --seqlens 2048 16384 --compare base=build/base/libfa3nn_hopper.so > "$out/bwd_check.log" 2>&1
echo "bwd check rc $?"; grep -E "FAIL" "$out/bwd_check.log"; sed -n '/^| hdim/,$p' "$out/bwd_check.log"
stamp training
mkdir -p "$out/two"
FP8=0 OUT="$out/two" timeout 270 bash scripts/gpu_scaling_run.sh 2 70 > "$out/two.log" 2>&1
echo "2 GPU rc $?"; tail -n 5 "$out/two.log"
stamp done
gpu_archive m128_pair.tgz
