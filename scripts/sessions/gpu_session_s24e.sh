#!/usr/bin/env bash
# 2026-12-03 (twenty-fourth session): every GPU test on the final tree (d128's 256-key default chained across tile
# ends; the exact-score FP8 checks with the tensor cores' accumulation bound), then 45 (unchained), the default
# (54, the store inside the boundary turn) and 55 (the store after it) interleaved. Carry build.
# (Variant 55 was removed after this run: no faster than 54; benchmarks/NOTES.md, twenty-fourth session.)
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s24e
export FA3NN_TRITON_AUTOTUNE=0
stamp tests
gpu_all_tests 330 120
grep -E "^(FAILED|ERROR)" "$out/tests_all.log" | head -n 10
grep -E "^(FAILED|ERROR)" "$out/rerun.log" 2>/dev/null | head -n 5
stamp ab
timeout 150 python scripts/bench_hopper_fp8.py --json "$out/ab.json" --headdims 128 --block-k 768 \
    --seqlens 2048 4096 8192 16384 --iters 20 --reps 15 \
    --variants key_block_256_mma_row_sum key_block_256_cross_tile_late_store > "$out/ab.log" 2>&1
echo "ab rc $?"; sed -n '/^| /,$p' "$out/ab.log" | cut -d'|' -f2-5,9,10
stamp done
