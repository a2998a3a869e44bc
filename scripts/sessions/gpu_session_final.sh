#!/usr/bin/env bash
# The evening session's validation call on one H200 (2026-11-30, benchmarks/NOTES.md "FP8: V's per-tile scale in
# P" and "In-kernel GQA/MQA for the native backward"), stages with their own limits, one archive under $OUT:
#   1. the whole GPU suite (native FP8 with the V factor in P and power-of-two tile scales, persistent launch, exp2
#      polynomial; the in-kernel GQA backward tests; everything else)
#   2. the native FP8 kernel alone against the build before the V factor (BEFORE, --compare), one CTA per tile and
#      MUFU-only exp2, d128/d256 x 2048/8192/16384 x causal (scripts/bench_hopper_fp8.py)
#   3. in-kernel GQA backward vs the expansion path vs cuDNN (scripts/hopper_bwd_gqa_check.py)
#   4. FP8 end to end (recipe -> fused pass -> native kernel) vs bf16 native and cuDNN (scripts/bench.py)
# Carry build/libfa3nn_hopper.so (this tree) and build/before/libfa3nn_hopper.so (17c90d0).
#
#   bash scripts/sessions/gpu_session_final.sh [SUITE_S] [FP8_S] [GQA_S] [E2E_S]
set -u
suite_s=${1:-230}
fp8_s=${2:-100}
gqa_s=${3:-120}
e2e_s=${4:-100}
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-final

timeout "$suite_s" python -m pytest -m gpu -n 8 -v -rfE -p no:cacheprovider tests/ > "$out/gpu_tests.log" 2>&1
echo "suite rc $?"; gpu_log_summary "$out/gpu_tests.log"

compare=()
[ -f build/before/libfa3nn_hopper.so ] && compare=(--compare before=build/before/libfa3nn_hopper.so)
timeout "$fp8_s" python scripts/bench_hopper_fp8.py --json "$out/fp8_kernel.json" --headdims 128 256 \
    --seqlens 2048 8192 16384 --variants one_cta_per_tile poly_exp2 "${compare[@]}" > "$out/fp8_kernel.log" 2>&1
echo "fp8 kernel rc $?"; sed -n '/^| hdim/,$p' "$out/fp8_kernel.log"
grep -q '^| hdim' "$out/fp8_kernel.log" || grep -E "^d(128|256) " "$out/fp8_kernel.log"

timeout "$gqa_s" python scripts/hopper_bwd_gqa_check.py > "$out/gqa.log" 2>&1
echo "gqa rc $?"; grep -E "FAIL" "$out/gqa.log" | head -n 10; sed -n '/^| hdim/,$p' "$out/gqa.log"
grep -q '^| hdim' "$out/gqa.log" || tail -n 12 "$out/gqa.log"

timeout "$e2e_s" python scripts/bench.py --backends hopper-fp8 hopper cudnn --directions fwd --headdims 128 256 \
    --seqlens 8192 16384 --causal both --reps 5 --out-dir "$out" --tag fp8-e2e > "$out/fp8_e2e.log" 2>&1
echo "fp8 e2e rc $?"; sed -n '/^| hdim/,$p' "$out/fp8-e2e.md" 2>/dev/null
gpu_archive final.tgz  # only the archive travels back
