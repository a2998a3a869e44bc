#!/usr/bin/env bash
# Device call after the ncu profile of 2026-11-30 evening: (1) the GPU suite on the changed kernels (mbarrier waits
# with a suspend-time hint and a time-based hang guard, FP8 descale tile index without integer division, FP8 d128
# all-MUFU exp2 by default), (2) each changed kernel against the build of the previous main (build/base, carried) in
# the same run: FP8 forward (kernel only), bf16 forward (with cuDNN), bf16 backward (with cuDNN). One archive.
#
#   bash scripts/sessions/gpu_session_hint.sh [SUITE_S] [FP8_S] [FWD_S] [BWD_S]
set -u
suite_s=${1:-180}
fp8_s=${2:-120}
fwd_s=${3:-120}
bwd_s=${4:-150}
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-hint
base=build/base/libfa3nn_hopper.so

timeout "$suite_s" python -m pytest -m gpu -n 8 -v -rfE -p no:cacheprovider tests/ > "$out/gpu_tests.log" 2>&1
echo "suite rc $?"; gpu_log_summary "$out/gpu_tests.log"

timeout "$fp8_s" python3 scripts/bench_hopper_fp8.py --json "$out/fp8.json" --headdims 128 256 \
    --seqlens 4096 16384 --variants poly_exp2 --compare "base=$base" > "$out/fp8.log" 2>&1
echo "fp8 rc $?"; sed -n '/^| hdim/,$p' "$out/fp8.log"

timeout "$fwd_s" python3 scripts/bench_hopper.py --json "$out/fwd.json" --headdims 128 64 256 --seqlens 2048 16384 \
    --ablation-seqlens --experiment-seqlens --compare "base=$base" > "$out/fwd.log" 2>&1
echo "fwd rc $?"; tail -n 16 "$out/fwd.log"

OUT=$out timeout "$bwd_s" python3 scripts/hopper_bwd_device_check.py --variants bulk_dq bulk_dq_overlap \
    --compare "base=$base" --headdims 128 64 --seqlens 2048 8192 > "$out/bwd.log" 2>&1
echo "bwd rc $?"; sed -n '/^| hdim/,$p' "$out/bwd.log"
gpu_archive hint.tgz
