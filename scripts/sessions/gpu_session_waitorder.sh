#!/usr/bin/env bash
# 2026-12-01: the forward's P V wait made to depend on the softmax's row sums (wgmma_wait_after), because ptxas had
# hoisted the plain wait above the whole softmax in every forward kernel (no intra-warpgroup overlap in SASS).
# (1) forward GPU tests, bf16 and FP8; (2) FP8 forward (kernel only) against the previous build (build/base) and
# cuDNN's FP8 in the same run; (3) bf16 forward against the previous build and cuDNN, with the ablation rows.
#
#   bash scripts/sessions/gpu_session_waitorder.sh [TESTS_S] [FP8_S] [CUDNN_FP8_S] [FWD_S]
set -u
tests_s=${1:-150}
fp8_s=${2:-100}
cudnn_s=${3:-100}
fwd_s=${4:-200}
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-waitorder
gpu_wheels "$out/wheels" "nvidia_cudnn_frontend-*.whl"
base=build/base/libfa3nn_hopper.so

stamp tests
timeout "$tests_s" python -m pytest -m gpu -n 8 -v -rfE -p no:cacheprovider tests/test_hopper.py \
    tests/test_hopper_fp8.py > "$out/tests.log" 2>&1
echo "tests rc $?"; gpu_log_summary "$out/tests.log"

stamp fp8
timeout "$fp8_s" python3 scripts/bench_hopper_fp8.py --json "$out/fp8.json" --headdims 128 256 \
    --seqlens 2048 8192 16384 --variants poly_exp2 --compare "base=$base" > "$out/fp8.log" 2>&1
echo "fp8 rc $?"; sed -n '/^| hdim/,$p' "$out/fp8.log"

stamp cudnn_fp8
timeout "$cudnn_s" python3 scripts/bench_cudnn_fp8.py --json "$out/cudnn_fp8.json" --headdims 128 256 \
    --seqlens 4096 16384 > "$out/cudnn_fp8.log" 2>&1
echo "cudnn fp8 rc $?"; sed -n '/^| /,$p' "$out/cudnn_fp8.log" | tail -n 12

stamp fwd
timeout "$fwd_s" python3 scripts/bench_hopper.py --json "$out/fwd.json" --headdims 128 64 256 \
    --seqlens 512 1024 2048 8192 16384 --ablation-seqlens 8192 --reps 5 --compare "base=$base" > "$out/fwd.log" 2>&1
echo "fwd rc $?"; sed -n '/^| hdim/,$p' "$out/fwd.log"
stamp done
gpu_archive waitorder.tgz
