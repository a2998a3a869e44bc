#!/usr/bin/env bash
# 2026-12-01 (second session): the fused quantization pass with the 192-row K/V tiles of the new d128 default
# (PerTileScaling block_k None -> 192) measured 0.245 ms against 0.134 with 128-row tiles; the surplus K/V programs
# now only zero their amax slot. (1) the Triton FP8 GPU suite; (2) quant ms with 192- and 128-row K/V tiles; (3) the
# FP8 rows end to end at d128 / d256.
set -u
source "$(dirname "$0")/gpu_env.sh"
gpu_setup /tmp/fa3nn-quant192
stamp() { echo "[$SECONDS s] $*"; }
stamp tests
timeout 150 python -m pytest -m gpu -n 8 -q -rfE -p no:cacheprovider tests/test_fp8_triton_gpu.py tests/test_fp8_api.py \
    > "$out/tests.log" 2>&1
echo "tests rc $?"; tail -n 3 "$out/tests.log"
stamp quant
for bk in default 128; do
  extra=(); [ "$bk" = default ] || extra=(--block-k "$bk")
  timeout 90 python scripts/bench_fp8_quant.py --headdims 128 256 --seqlens 2048 16384 --precisions fwht \
      "${extra[@]}" --json "$out/quant_$bk.json" > "$out/quant_$bk.log" 2>&1
  echo "quant $bk rc $?"; sed -n '/^| d |/,$p' "$out/quant_$bk.log"
done
stamp e2e
timeout 200 python scripts/bench.py --backends hopper-fp8 hopper --directions fwd --headdims 128 256 \
    --seqlens 2048 8192 16384 --causal both --reps 5 --out-dir "$out" --tag fp8-e2e > "$out/fp8_e2e.log" 2>&1
echo "e2e rc $?"; sed -n '/^| hdim/,$p' "$out/fp8-e2e.md" | cut -d'|' -f1-7,10-20
stamp done
gpu_archive quant192.tgz
