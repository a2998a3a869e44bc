#!/usr/bin/env bash
# 2026-12-03 (eighteenth session), fourth call: native FP8 d128 with three consumer warpgroups (variant fused_turn_w3:
# the 128-key fused turn at 160 registers per consumer thread, 192-row query tiles, as d64's default; 0 spills
# offline). At d128 FP8 one MUFU exp2 per score and the tensor cores have the same ceiling, and with two
# warpgroups each one's softmax (~half of its ~4000-clock period per 256-key block) cannot overlap its own GEMMs: a
# third warpgroup gives the SM another softmax to run under the others' GEMMs. (1) Same function as the two-consumer
# fused_turn (max abs diff, expected 0). (2) Timed beside the default (256-key split S) and fused_turn, 1k-16k; second run: also without pingpong and with every 8th exp2 as the FP32 polynomial.
# Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s18d
stamp exact
timeout 90 python scripts/fp8_variant_exactness.py --variant fused_turn_w3 --against fused_turn --headdims 128 \
    --seqlens 1024 16384 --block-k 256 > "$out/exact.log" 2>&1
echo "exact rc $?"; tail -n 6 "$out/exact.log"
stamp native
gpu_fp8_bench w3 200 --headdims 128 --seqlens 1024 2048 4096 8192 16384 --block-k 256 --reps 5 \
    --variants fused_turn fused_turn_w3 fused_turn_w3_no_pingpong fused_turn_w3_poly8
stamp done
gpu_archive s18d.tar.gz
