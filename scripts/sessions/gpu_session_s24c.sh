#!/usr/bin/env bash
# 2026-12-03 (twenty-fourth session): variant 54 rewritten (key_block_256_cross_tile: each tile's key loop as
# fused_tile's, one turn across each tile end with the store inside it): bitwise against the default and against
# the emulation (dense, varlen), then timed beside the default (45) and our bf16 (interleaved), and beside cuDNN's
# FP8 with the default and with 54. Carry build and .whl.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s24c
export FA3NN_TRITON_AUTOTUNE=0
stamp tests
gpu_pytest tests_cross_tile.log 200 tests/test_hopper_fp8.py -k "cross_tile or varlen_on_256"
grep -E "^(FAILED|ERROR)" "$out/tests_cross_tile.log" | head -n 10
stamp ab
timeout 150 python scripts/bench_hopper_fp8.py --json "$out/cross_tile.json" --headdims 128 --block-k 768 \
    --seqlens 1024 2048 4096 8192 16384 --iters 20 --reps 9 --variants key_block_256_cross_tile \
    > "$out/cross_tile.log" 2>&1
echo "ab rc $?"; sed -n '/^| /,$p' "$out/cross_tile.log" | cut -d'|' -f2-7,9
stamp cudnn
gpu_cudnn_fp8 120 --headdims 128 --seqlens 4096 8192 16384 --iters 10 --reps 11
mv "$out/cudnn_fp8.json" "$out/cudnn_fp8_default.json"; mv "$out/cudnn_fp8.log" "$out/cudnn_fp8_default.log"
gpu_cudnn_fp8 120 --headdims 128 --seqlens 4096 8192 16384 --iters 10 --reps 11 --variant key_block_256_cross_tile
stamp done
