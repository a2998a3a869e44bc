#!/usr/bin/env bash
# 2026-12-01 (third session): every d128 non-causal call past 1024 queries now takes 128 x 160 tiles with Q
# double-buffered (variant 5; results/midtiles-h200-20261201-1135/ had it ahead of 128 x 176 at 2048-16384), and the
# ablations / diagnostics use the same tiles. (1) the native forward's GPU suite (4224 and 8192 now on the new
# tiles); (2) d128 non-causal against cuDNN at 1024-16384 with the ablation rows at 2048 and 16384. Carry the library.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-midtiles2
stamp tests
timeout 200 python -m pytest -m gpu -n 8 -q -rfE -p no:cacheprovider tests/test_hopper.py > "$out/tests.log" 2>&1
echo "tests rc $?"; tail -n 3 "$out/tests.log"
stamp bench
timeout 150 python3 scripts/bench_hopper.py --json "$out/midtiles2.json" --headdims 128 \
    --seqlens 1024 2048 4096 8192 16384 --ablation-seqlens 2048 16384 --reps 7 > "$out/midtiles2.log" 2>&1
echo "bench rc $?"; grep -E "^\| 128 \| [0-9]+ \| no" "$out/midtiles2.log"
stamp done
