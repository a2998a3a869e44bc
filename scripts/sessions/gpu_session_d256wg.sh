#!/usr/bin/env bash
# 2026-12-01 (fourth session). Triton: the dK/dV head-dim split and the 128x64 d256 forward tiles, now defaults
# (measured +11-22% / +8-31% at 2048 and 8192 in results/triton256-h200-20261201-1252): (1) the Triton GPU suite
# on the defaults; (2) the split against the one-program kernel at 512 and 1024 (not yet measured); (3) the
# integrated d256 rows against cuDNN and FA2. FP8: the warp-uniform warpgroup index (build/libfa3nn_hopper.so)
# against HEAD's build (build/base/libfa3nn_hopper.so): (4) the FP8 suite, (5) kernel-only d128 with 15 rounds.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-d256wg
stamp triton tests
gpu_pytest tests_triton.log 150 tests/test_triton_gpu.py
stamp split short
timeout 120 python3 scripts/triton_tile_ab.py --variants pinned+row-stats pinned+row-stats+split-d \
    --headdims 256 --seqlens 512 1024 --json "$out/tile_ab_short.json" > "$out/tile_ab_short.log" 2>&1
echo "split rc $?"; grep -E "^\| pinned" "$out/tile_ab_short.log"
stamp bench d256
timeout 200 python3 scripts/bench.py --backends triton cudnn fa2 --headdims 256 --out-dir "$out" --tag d256 --precompile 8 \
    > "$out/bench_d256.log" 2>&1
echo "bench rc $?"; grep -E "^\|" "$out/d256.md" | head -30
stamp fp8 tests
gpu_pytest tests_fp8.log 120 tests/test_hopper_fp8.py
stamp fp8 bench
timeout 180 python3 scripts/bench_hopper_fp8.py --json "$out/fp8.json" --headdims 128 --seqlens 4096 16384 \
    --reps 15 --iters 10 --block-k 384 --compare base=build/base/libfa3nn_hopper.so > "$out/fp8.log" 2>&1
echo "fp8 bench rc $?"; sed -n '/^| hdim/,$p' "$out/fp8.log"
stamp done
