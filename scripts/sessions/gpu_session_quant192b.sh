#!/usr/bin/env bash
# 2026-12-01 (second session), last FP8 call: the fused pass now quantizes a 192-row K/V tile as 128 + 64-row parts
# with 8 warps (was one 256-row tile with 16 warps for the whole launch: 0.20 ms vs 0.134 with 128-row tiles).
# (1) FP8 GPU suites; (2) quant ms with 192- and 128-row K/V tiles; (3) the FP8 end-to-end table with cuDNN (bf16)
# and our bf16 forward, head dims 128 and 256.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-quant192b
stamp tests
timeout 150 python -m pytest -m gpu -n 8 -q -rfE -p no:cacheprovider tests/test_fp8_triton_gpu.py tests/test_fp8_api.py \
    tests/test_hopper_fp8.py > "$out/tests.log" 2>&1
echo "tests rc $?"; tail -n 3 "$out/tests.log"
stamp quant
for bk in default 128; do
  extra=(); [ "$bk" = default ] || extra=(--block-k "$bk")
  timeout 90 python scripts/bench_fp8_quant.py --headdims 128 256 --seqlens 2048 16384 --precisions fwht \
      "${extra[@]}" --json "$out/quant_$bk.json" > "$out/quant_$bk.log" 2>&1
  echo "quant $bk rc $?"; sed -n '/^| d |/,$p' "$out/quant_$bk.log"
done
stamp e2e
timeout 300 python scripts/bench.py --backends hopper-fp8 hopper cudnn --directions fwd --headdims 128 256 \
    --seqlens 2048 4096 8192 16384 --causal both --reps 5 --out-dir "$out" --tag fp8-e2e > "$out/fp8_e2e.log" 2>&1
echo "e2e rc $?"; sed -n '/^| hdim/,$p' "$out/fp8-e2e.md" | cut -d'|' -f1-7,10-11,14-30
stamp done
gpu_archive quant192b.tgz
