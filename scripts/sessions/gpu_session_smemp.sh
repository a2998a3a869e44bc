#!/usr/bin/env bash
# 2026-12-02 (fifteenth session): the FP8 d128 forward with P through shared memory on 192-key blocks (variants 36
# key_block_192_smem_p / 37 _poly4: Q K^T issued right after P V's second head-dim half, before its wait; offline
# 0 spills, no wgmma serialization, where the 256-key form spilled 72-88 B). Not in main: apply
# benchmarks/results/fp8smemp-offline-20261202/attempt_192.patch first, build, and carry build/libfa3nn_hopper.so.
# Measured 0.73-0.97x the 192-key fused turn it modifies (results/smemp-h200-20261202-1949).
# (1) the 192-key emulation tests with the new variants; (2) kernel-only TFLOP/s against the default (256-key
# split S with block_k 768) and the 192-key fused turn (poly4) it modifies, d128 2k / 8k / 16k.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-smemp
stamp tests
gpu_pytest tests_smemp.log 75 tests/test_hopper_fp8.py -k "key_block_192_matches"
stamp bench
timeout 110 python3 scripts/bench_hopper_fp8.py --json "$out/smemp.json" --headdims 128 --seqlens 2048 8192 16384 \
    --block-k 768 --variants key_block_192_fused_turn_poly4 key_block_192_smem_p key_block_192_smem_p_poly4 \
    > "$out/smemp.log" 2>&1
echo "bench rc $?"; grep -E "^\| 128" "$out/smemp.log"
stamp done
gpu_archive smemp.tar.gz
