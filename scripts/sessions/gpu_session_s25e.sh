#!/usr/bin/env bash
# (Variant 57 skip_mask was removed after this run; its patch is
# benchmarks/results/s25e-h200-20261204-0046/skip_mask.patch.)
# 2026-12-04 (twenty-fifth session): what the mask costs d128's FP8 default: variant 57
# (key_block_256_cross_tile_skip_mask, WRONG output under causal, timing only) beside the default, interleaved, 15
# reps, causal and not (non-causal at multiples of 256 keys masks nothing: the runs' spread). Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s25e
stamp ab
timeout 200 python scripts/bench_hopper_fp8.py --json "$out/skip_mask.json" --headdims 128 --block-k 768 \
    --seqlens 2048 4096 8192 --iters 20 --reps 15 --variants key_block_256_cross_tile_skip_mask \
    > "$out/skip_mask.log" 2>&1
echo "ab rc $?"; sed -n '/^| /,$p' "$out/skip_mask.log" | cut -d'|' -f2-5,9
python3 - "$out/skip_mask.json" <<'PY'
import json, statistics, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    s = r["samples_ms"]
    ratios = sorted(a / b for a, b in zip(s["fp8"], s["fp8_key_block_256_cross_tile_skip_mask"]))
    print(r["seqlen"], "causal" if r["causal"] else "non-causal", "default / skip_mask time, median %.4f (%.4f-%.4f)"
          % (statistics.median(ratios), ratios[len(ratios) // 4], ratios[3 * len(ratios) // 4]))
PY
stamp done
