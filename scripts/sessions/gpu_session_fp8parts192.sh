#!/usr/bin/env bash
# 2026-12-01 (third session): what the 192-key FP8 d128 loop is made of. The clock probe
# (results/clocks-h200-20261201-1050) has the default at 0.408 of peak per clock at 1861 MHz, below the 0.5 that
# fully serialized MUFU and tensor work would give; these timing variants of one build split that: without pingpong
# (correct output, its exact-score test runs first), without the exp2s, without the row max tree, without the whole
# softmax (the last three WRONG outputs, timing only). Carry build/libfa3nn_hopper.so.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-fp8parts192
stamp tests
timeout 120 python -m pytest -m gpu -n 8 -q -rfE -p no:cacheprovider tests/test_hopper_fp8.py -k key_block_192 \
    > "$out/tests.log" 2>&1
echo "tests rc $?"; tail -n 2 "$out/tests.log"
stamp bench
timeout 240 python3 scripts/bench_hopper_fp8.py --json "$out/fp8.json" --headdims 128 --seqlens 4096 8192 16384 \
    --reps 8 --iters 10 --block-k 384 --variants key_block_192_no_pingpong key_block_192_skip_exp2 \
    key_block_192_skip_row_max key_block_192_skip_softmax > "$out/fp8.log" 2>&1
echo "bench rc $?"; sed -n '/^| hdim/,$p' "$out/fp8.log"
stamp clocks
timeout 120 python3 scripts/clock_probe.py --json "$out/clocks.json" --headdim 128 --fp8-variants \
    key_block_192_no_pingpong key_block_192_skip_exp2 key_block_192_skip_row_max key_block_192_skip_softmax \
    --kernels fp8 fp8_key_block_192_no_pingpong fp8_key_block_192_skip_exp2 fp8_key_block_192_skip_row_max \
    fp8_key_block_192_skip_softmax > "$out/clocks.log" 2>&1
echo "clocks rc $?"; sed -n '/^| kernel/,$p' "$out/clocks.log"
stamp done
gpu_archive fp8parts192.tgz
