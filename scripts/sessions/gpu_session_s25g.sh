#!/usr/bin/env bash
# 2026-12-04 (twenty-fifth session): FP8 variant 57 (tma_store_o: d128's 256-key default storing O through shared
# memory by TMA; s25f's trace put the direct stores at ~2000 clocks inside the turn at every tile end): bitwise
# against the default (dense, varlen falls back), the tile-end turn traced, timed beside the default (interleaved, 15
# reps) and beside cuDNN's FP8 (default and 57, 15 reps). Carry build and .whl.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s25g
stamp tests
gpu_pytest tests_tma_store.log 150 tests/test_hopper_fp8.py -k "tma_store_o or varlen_on_256"
grep -E "^(FAILED|ERROR)" "$out/tests_tma_store.log" | head -n 10
stamp trace
for args in "4096 1 57 1" "4096 1 0 1"; do
    echo "== fp8_trace $args"
    timeout 60 build/fp8_trace $args 2>&1 | grep -E "TFLOP/s|fit over|tile-end turn"
done | tee "$out/trace.log"
stamp ab
timeout 200 python scripts/bench_hopper_fp8.py --json "$out/tma_store.json" --headdims 128 --block-k 768 \
    --seqlens 1024 2048 4096 8192 16384 --iters 20 --reps 15 --variants tma_store_o > "$out/tma_store.log" 2>&1
echo "ab rc $?"; sed -n '/^| /,$p' "$out/tma_store.log" | cut -d'|' -f2-5,9
python3 - "$out/tma_store.json" <<'PY'
import json, statistics, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    s = r["samples_ms"]
    ratios = sorted(a / b for a, b in zip(s["fp8"], s["fp8_tma_store_o"]))
    print(r["seqlen"], "causal" if r["causal"] else "non-causal", "default / tma_store_o time, median %.4f (%.4f-%.4f)"
          % (statistics.median(ratios), ratios[len(ratios) // 4], ratios[3 * len(ratios) // 4]))
PY
stamp cudnn
gpu_cudnn_fp8 100 --headdims 128 --seqlens 2048 4096 8192 --causal yes --iters 10 --reps 15
mv "$out/cudnn_fp8.json" "$out/cudnn_fp8_default.json"; mv "$out/cudnn_fp8.log" "$out/cudnn_fp8_default.log"
gpu_cudnn_fp8 100 --headdims 128 --seqlens 2048 4096 8192 --causal yes --iters 10 --reps 15 --variant tma_store_o
stamp done
