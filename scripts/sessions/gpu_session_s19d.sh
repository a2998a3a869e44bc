#!/usr/bin/env bash
# 2026-12-03 (nineteenth session), fourth call: with the integer row max, is the first half's max under the second
# half's GEMM (split S, the default) still worth its second commit group? Variant key_block_256_fused_turn_int_max
# (41: one n256 Q K^T) against the default (37) and the float split S (34), kernel only, 256-row K/V tiles; its
# output against key_block_256_fused_turn's (expected: max abs diff 0). Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s19d
timeout 60 python scripts/fp8_variant_exactness.py --variant key_block_256_fused_turn_int_max \
    --against key_block_256_fused_turn --headdims 128 --seqlens 1024 16384 --block-k 256 > "$out/exact.log" 2>&1
echo "exact rc $?"; tail -n 4 "$out/exact.log"
stamp native
gpu_fp8_bench onegemm 200 --headdims 128 --seqlens 1024 2048 4096 8192 16384 --block-k 256 --reps 5 \
    --variants key_block_256_split_s key_block_256_fused_turn_int_max
stamp done
gpu_archive s19d.tar.gz
