#!/usr/bin/env bash
# Prepared 2026-12-01 (third session), not yet run: the two d256 Triton candidates from the offline compiles
# (benchmarks/NOTES.md "Prepared, not timed: the head-dim split of the Triton dK/dV kernel" and the d256 forward
# note after it). (1) the Triton GPU suite with the dK/dV split on (FA3NN_TRITON_DKDV_SPLIT_D=2: every d256 test
# then runs it, bf16 and fp16); (2) the backward, pinned vs the split with its candidate tiles
# (scripts/triton_tile_ab.py checks the gradients against pinned first); (3) the forward at d256 with the pinned
# tiles and with table d256-fwd-wide, each beside cuDNN (scripts/bench.py, two runs: the table is read at import).
# No library to carry (Triton only).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-triton256
stamp tests
FA3NN_TRITON_DKDV_SPLIT_D=2 timeout 200 python -m pytest -m gpu -n 8 -q -rfE -p no:cacheprovider \
    tests/test_triton_gpu.py > "$out/tests_split.log" 2>&1
echo "tests rc $?"; tail -n 2 "$out/tests_split.log"
stamp bwd
timeout 200 python3 scripts/triton_tile_ab.py --variants pinned+row-stats d256-split+row-stats+split-d \
    --headdims 256 --seqlens 2048 8192 --json "$out/tile_ab.json" > "$out/tile_ab.log" 2>&1
echo "bwd rc $?"; tail -n 8 "$out/tile_ab.log"
stamp fwd
for table in pinned d256-fwd-wide; do
    FA3NN_TRITON_TILES=$table timeout 150 python3 scripts/bench.py --backends triton cudnn --directions fwd \
        --headdims 256 --seqlens 2048 8192 --out-dir "$out" --tag "fwd-$table" > "$out/fwd-$table.log" 2>&1
    echo "fwd $table rc $?"; grep -E "^\| 256" "$out/fwd-$table.md"
done
stamp done
