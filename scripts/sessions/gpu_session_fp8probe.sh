#!/usr/bin/env bash
# 2026-12-01: what bounds the FP8 d128 forward's step. Same-library variants (fa3nn.backends.hopper_fp8.VARIANTS):
# skip_softmax (the loop without max/exp2/sum: wrong output, timing only), plain_pv_wait (the P V wait that ptxas
# hoists above the softmax, as before wgmma_wait_after), no_pingpong, poly_exp2; bf16 forward against the previous
# build (build/base: the plain wait everywhere) with more rounds than the first run.
#
#   bash scripts/sessions/gpu_session_fp8probe.sh [TESTS_S] [FP8_S] [FWD_S]
set -u
tests_s=${1:-90}
fp8_s=${2:-150}
fwd_s=${3:-200}
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-fp8probe
base=build/base/libfa3nn_hopper.so

stamp tests
timeout "$tests_s" python -m pytest -m gpu -n 8 -v -rfE -p no:cacheprovider tests/test_hopper_fp8.py \
    -k "benchmark_variant" > "$out/tests.log" 2>&1
echo "tests rc $?"; gpu_log_summary "$out/tests.log"

stamp fp8
timeout "$fp8_s" python3 scripts/bench_hopper_fp8.py --json "$out/fp8.json" --headdims 128 \
    --seqlens 4096 8192 16384 --reps 7 --iters 10 \
    --variants skip_softmax plain_pv_wait no_pingpong poly_exp2 --compare "base=$base" > "$out/fp8.log" 2>&1
echo "fp8 rc $?"; sed -n '/^| hdim/,$p' "$out/fp8.log"

stamp fwd
timeout "$fwd_s" python3 scripts/bench_hopper.py --json "$out/fwd.json" --headdims 128 64 256 \
    --seqlens 512 1024 2048 16384 --ablation-seqlens --reps 9 --compare "base=$base" > "$out/fwd.log" 2>&1
echo "fwd rc $?"; sed -n '/^| hdim/,$p' "$out/fwd.log"
stamp done
gpu_archive fp8probe.tgz
