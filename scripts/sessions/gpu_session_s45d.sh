#!/usr/bin/env bash
# Forty-fifth session, fourth call: the forward's two-CTA tiles (branch wip-fwd-two-ctas: variants two_ctas /
# two_ctas_narrow, one consumer warpgroup on 64-row tiles, two CTAs per SM; every other kernel SASS-identical to
# main's but the d64 units, which moved a few instructions), library build/two/ built here from that branch, and
# build/m632/ (main before this session), carried as build/s45d.tar.xz. The short causal forwards
# are 0.91x cuDNN at 512 (d64 / d128, H100 s45c); cuDNN's short-call kernels are 64 x 128 with 4 warps
# (shortfinal ncu, NOTES), ours 128 x 128 with two pingponging consumers on one CTA per SM.
# 1. The variants' GPU tests (and the C ABI refusals). 2. bench_hopper.py: full / two_ctas / two_ctas_narrow beside
# cuDNN, d64 / d128, 512 / 1k / 2k / 8k, causal and not.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s45d s45d.tar.xz
export FA3NN_HOPPER_LIB=$PWD/build/two/libfa3nn_hopper.so
stamp start
gpu_pytest tests_two.log 120 tests/test_hopper.py -k "two_cta or c_abi or rising"
gpu_log_summary "$out/tests_two.log"
stamp "two-CTA tests"
timeout 240 python3 scripts/bench_hopper.py --headdims 64 128 --seqlens 512 1024 2048 8192 --ablation-seqlens \
    --variants full two_ctas two_ctas_narrow --compare main=build/m632/libfa3nn_hopper.so --json "$out/two.json" > "$out/two.log" 2>&1
echo "bench rc $?"; grep -E "^\| (64|128) " "$out/two.log"
stamp bench
gpu_archive s45d.tgz
