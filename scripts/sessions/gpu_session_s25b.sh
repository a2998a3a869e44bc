#!/usr/bin/env bash
# (Variant 57 was removed after these runs: no gain on issue 5's row; its patch is
# benchmarks/results/s25b-h200-20261204-0006/half_pv.patch.)
# 2026-12-03 (twenty-fifth session): variant 57 (key_block_256_half_pv: the default
# kernel without the P V k-steps over the second key half of a tile's last block where no row of the tile attends it):
# bitwise against the default (dense, causal and not, 2000x1900 and 4096x4096) and against the emulation on varlen,
# then timed beside the default (interleaved, 15 rounds). Then the bf16 forward's causal deals: variant 12
# (one_section, Problem::causal_deal 2) beside the default and l2_sections, bitwise test and timing. Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s25b
stamp tests
gpu_pytest tests_half.log 200 tests/test_hopper_fp8.py tests/test_hopper.py -k "cross_tile or varlen_on_256 or causal_deals"
grep -E "^(FAILED|ERROR)" "$out/tests_half.log" | head -n 10
stamp ab
timeout 200 python scripts/bench_hopper_fp8.py --json "$out/half.json" --headdims 128 --block-k 768 \
    --seqlens 1024 2048 4096 8192 16384 --iters 20 --reps 15 \
    --variants key_block_256_half_pv > "$out/half.log" 2>&1
echo "ab rc $?"; sed -n '/^| /,$p' "$out/half.log" | cut -d'|' -f2-9
stamp bf16deal
timeout 180 python scripts/bench_hopper.py --json "$out/bf16_deal.json" --headdims 64 128 256 \
    --seqlens 2048 4096 8192 --iters 10 --reps 11 --ablation-seqlens --variants full one_section l2_sections \
    > "$out/bf16_deal.log" 2>&1
echo "bf16 deal rc $?"; grep -E "\| yes \|" "$out/bf16_deal.log" | cut -d'|' -f2-7
stamp done
