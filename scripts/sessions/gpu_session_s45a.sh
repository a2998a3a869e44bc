#!/usr/bin/env bash
# Forty-fifth session, first call: the d128 and d64 varlen backward with published tiles (branch wip-d64-publish:
# main + results/s44-offline-d128-varlen-publish/'s patch + the same for d64's m128; BwdConfig::kPublishTiles for the
# default-variant varlen kernels, non-causal, no window; step loops d128 855 -> 703, d64 1016 -> 870 instructions
# (dense 703 / 872), softcap 1178 -> 1024, 2309 -> 2158; 0 spills; every other kernel SASS-identical).
# Built here, carried as build/s45a.tar.xz:
#   (in main)               FA3NN_KERNELS_DIR=kernels/hopper python -m fa3nn.backends.hopper_build --out build/m632/libfa3nn_hopper.so
#   (in the branch's tree)  the same flags, objects kept, into <main>/build/pub64/libfa3nn_hopper.so
#   tar cJf build/s45a.tar.xz --exclude='*.ptxas.log' -C build m632 pub64
# 1. The varlen backward tests (every head dim; 144) on pub64. 2. bwd_varlen_ab.py --headdims 64 128, pub64 against
# main's library on the same packed calls (uniform 512 / 2048, mixed [256, 4096], short [32, 1024]), then with
# softcap 30 (2048, mixed).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s45a s45a.tar.xz
export FA3NN_HOPPER_LIB=$PWD/build/pub64/libfa3nn_hopper.so
stamp start
gpu_pytest tests_varlen.log 150 tests/test_hopper_bwd.py tests/test_fa3_compat.py -k varlen
gpu_log_summary "$out/tests_varlen.log"
stamp "varlen tests"
timeout 220 python3 scripts/bwd_varlen_ab.py --headdims 64 128 --varlen-cases 512 2048 mixed short --no-triton \
    --compare main=build/m632/libfa3nn_hopper.so --rounds 5 --json "$out/varlen.json" > "$out/varlen.log" 2>&1
echo "varlen rc $?"; grep -E "^\| " "$out/varlen.log"
stamp varlen
timeout 110 python3 scripts/bwd_varlen_ab.py --headdims 64 128 --varlen-cases 2048 mixed --no-triton --softcap 30 \
    --compare main=build/m632/libfa3nn_hopper.so --rounds 5 --json "$out/varlen_softcap.json" \
    > "$out/varlen_softcap.log" 2>&1
echo "varlen softcap rc $?"; grep -E "^\| " "$out/varlen_softcap.log"
stamp "varlen softcap"
gpu_archive s45a.tgz
