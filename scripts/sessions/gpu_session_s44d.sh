#!/usr/bin/env bash
# Forty-fourth session, fourth call: main at the merge of wip/mla-keys-varlen (library build/pub/, and s44c's
# build/s44c/ as the base: main before it), carried as build/s44d.tar.xz.
#   pub/  mla_keys for varlen (tiles published by the producer, BwdConfig::kPublishTiles) and the dQ writer's arrival
#         ahead for the CTA's first step (dense mla_keys changed: no first-step test); DEFAULT_VARIANTS[192] = mla_keys
#   s44c/ the base (dense mla_keys with the first-step test; varlen runs bulk_dq)
# 1. The MLA tests on pub/ (the varlen ones now run both variants, per tile and persistent on 3 CTAs) and the
#    rotated-infinity test (its tf32x3 form), first (failed starts left too little device time for the whole
#    suite; the d64 / d128 / d256 units are SASS-identical to those s44b's whole suite ran). Then 3, then 2.
# 2. Dense mla_keys, pub x s44c (bwd_build_ab.py), 512 / 2k / 8k / 16k, 3 rounds: the writer's arrival ahead.
# 3. Varlen MLA: mla_keys (the new default) x bulk_dq on the same packed calls (bwd_varlen_ab.py), uniform 512 /
#    2048 and mixed lengths in [256, 4096] / [32, 1024]; the dense call of the uniform ones beside.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s44d s44d.tar.xz
export FA3NN_HOPPER_LIB=$PWD/build/pub/libfa3nn_hopper.so
stamp start
gpu_pytest tests_mla.log 200 tests/test_hopper_bwd.py tests/test_hopper.py tests/test_fp8_triton_gpu.py \
    -k "mla or c_abi or infinities"
gpu_log_summary "$out/tests_mla.log"
stamp "mla tests"
timeout 90 python3 scripts/bwd_varlen_ab.py --headdims 192 --headdim-v 128 --varlen-cases 512 2048 mixed short \
    --variants bulk_dq --no-triton --rounds 5 --json "$out/varlen.json" > "$out/varlen.log" 2>&1
echo "varlen rc $?"; grep -E "^\| " "$out/varlen.log"
stamp varlen
timeout 60 python3 scripts/bwd_build_ab.py --headdims 192 --headdim-v 128 --variants mla_keys \
    --compare base=build/s44c/libfa3nn_hopper.so@mla_keys --seqlens 512 2048 8192 16384 --rounds 3 \
    --json "$out/ab.json" > "$out/ab.log" 2>&1
echo "ab rc $?"; grep -E "^\| " "$out/ab.log"
stamp ab
gpu_archive s44d.tgz
