#!/usr/bin/env bash
# 2026-12-01 (third session): d128 non-causal calls of 1025-2048 queries now take 128 x 160 tiles with Q
# double-buffered (variant 5) and 513-1024 take 128 x 128 (variant 4), from results/shorttiles-h200-20261201-1125/.
# (1) the native forward's GPU suite, with the new tests of those bands (dense bf16/fp16 MHA/GQA, varlen);
# (2) the d128 tile variants against cuDNN at 1024-16384 (is 128 x 160 also better past 2048?). Carry the library.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-midtiles
stamp tests
timeout 240 python -m pytest -m gpu -n 8 -q -rfE -p no:cacheprovider tests/test_hopper.py -k "not backward" \
    > "$out/tests.log" 2>&1
echo "tests rc $?"; tail -n 3 "$out/tests.log"
stamp bench
timeout 120 python3 scripts/bench_hopper.py --json "$out/midtiles.json" --headdims 128 --seqlens 1024 2048 \
    --ablation-seqlens --experiment-seqlens 4096 8192 16384 --experiment-headdims 128 --reps 7 \
    > "$out/midtiles.log" 2>&1
echo "bench rc $?"; grep -E "^\| 128 \| [0-9]+ \| no" "$out/midtiles.log"
stamp done
