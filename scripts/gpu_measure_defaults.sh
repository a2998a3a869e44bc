#!/usr/bin/env bash
# Measure what dispatch runs now, in one device call on one H200, stages with their own limits; everything archived
# under $OUT as measure.tgz (the device tool returns few files):
#   1. the native FP8 forward (kernel only; default: persistent launch, d128 exp2 partly on the FP32 pipe) against
#      one CTA per tile and MUFU-only exp2, d128/d256 x 2048/8192/16384 x causal and not (bench_hopper_fp8.py)
#   2. FP8 end to end through flash_attn_func(fp8="per_tile") (fused pass with the fwht rotation -> native kernel)
#      against the bf16 native forward and cuDNN (scripts/bench.py, hopper-fp8 rows)
#   3. bf16 forward and backward, hopper (default backward variants) / triton / cuDNN / FA2, d64/d128 at 2048-16384
#      (scripts/bench.py)
# Build the library here first (python -m fa3nn.backends.hopper_build --out build/libfa3nn_hopper.so) and carry it.
#
#   bash scripts/gpu_measure_defaults.sh [FP8_VARIANTS_S] [FP8_E2E_S] [BF16_S]
set -u
variants_s=${1:-90}
e2e_s=${2:-100}
bf16_s=${3:-300}
source "$(dirname "$0")/gpu_env.sh"
gpu_setup /tmp/fa3nn-measure

timeout "$variants_s" python scripts/bench_hopper_fp8.py --json "$out/fp8_variants.json" --headdims 128 256 \
    --seqlens 2048 8192 16384 --variants one_cta_per_tile poly_exp2 > "$out/fp8_variants.log" 2>&1
echo "fp8 variants rc $?"; sed -n '/^| /,$p' "$out/fp8_variants.log" | tail -n 16

timeout "$e2e_s" python scripts/bench.py --backends hopper-fp8 hopper cudnn --directions fwd --headdims 128 256 \
    --seqlens 2048 8192 16384 --causal both --reps 5 --out-dir "$out" --tag fp8-e2e > "$out/fp8_e2e.log" 2>&1
echo "fp8 e2e rc $?"; tail -n 16 "$out/fp8_e2e.log"

timeout "$bf16_s" python scripts/bench.py --backends hopper triton cudnn fa2 --headdims 64 128 \
    --seqlens 2048 8192 16384 --causal both --directions fwd bwd --out-dir "$out" --tag bf16-defaults \
    > "$out/bf16.log" 2>&1
echo "bf16 bench rc $?"; tail -n 30 "$out/bf16.log"
gpu_archive measure.tgz  # only the archive travels back
