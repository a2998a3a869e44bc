#!/usr/bin/env bash
# 2026-12-04 (twenty-fifth session): the TMA-store default against variant 54 (the same kernel with direct stores)
# at 8k / 16k, interleaved, 21 reps: does the 32 KB O buffer cost the long rows anything? Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s25j
stamp ab
timeout 200 python scripts/bench_hopper_fp8.py --json "$out/ab.json" --headdims 128 --block-k 768 \
    --seqlens 4096 8192 16384 --iters 20 --reps 21 --variants key_block_256_cross_tile > "$out/ab.log" 2>&1
echo "ab rc $?"
python3 - "$out/ab.json" <<'PY'
import json, statistics, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    s = r["samples_ms"]
    ratios = sorted(b / a for a, b in zip(s["fp8"], s["fp8_key_block_256_cross_tile"]))
    print(r["seqlen"], "causal" if r["causal"] else "non-causal", "TFLOP/s default %.1f direct %.1f;"
          % (r["tflops"]["fp8"], r["tflops"]["fp8_key_block_256_cross_tile"]),
          "direct / default time, median %.4f (%.4f-%.4f)"
          % (statistics.median(ratios), ratios[len(ratios) // 4], ratios[3 * len(ratios) // 4]))
PY
stamp done
