#!/usr/bin/env bash
# 2026-12-01: Vt keys permuted inside 16-key groups (fa3nn/fp8/operands.py) so the native FP8 forward packs P's
# e4m3 fragments without quad shuffles. (1) the FP8 GPU suites (native kernel, Triton FP8 kernel and fused pass on
# the GPU, API routing); (2) FP8 forward kernel-only timing against the previous build (build/base: shuffles, plain
# P V wait; its output is wrong on the new layout, its timing is not) and the plain_pv_wait variant; (3) cuDNN's
# FP8 forward in the same run.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-vtorder
gpu_wheels "$out/wheels" "nvidia_cudnn_frontend-*.whl"
stamp tests
timeout 150 python -m pytest -m gpu -n 8 -v -rfE -p no:cacheprovider tests/test_hopper_fp8.py \
    tests/test_fp8_triton_gpu.py tests/test_fp8_api.py > "$out/tests.log" 2>&1
echo "tests rc $?"; gpu_log_summary "$out/tests.log"
stamp fp8
timeout 150 python3 scripts/bench_hopper_fp8.py --json "$out/fp8.json" --headdims 128 256 \
    --seqlens 2048 4096 8192 16384 --reps 8 --iters 10 --variants plain_pv_wait \
    --compare base=build/base/libfa3nn_hopper.so > "$out/fp8.log" 2>&1
echo "fp8 rc $?"; sed -n '/^| hdim/,$p' "$out/fp8.log"
stamp cudnn_fp8
timeout 100 python3 scripts/bench_cudnn_fp8.py --json "$out/cudnn_fp8.json" --headdims 128 256 \
    --seqlens 4096 8192 16384 --cudnn-outputs e4m3 > "$out/cudnn_fp8.log" 2>&1
echo "cudnn fp8 rc $?"; grep -E '^\| (128|256) ' "$out/cudnn_fp8.log"
stamp done
gpu_archive vtorder.tgz
