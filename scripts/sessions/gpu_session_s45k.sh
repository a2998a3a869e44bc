#!/usr/bin/env bash
# Forty-fifth session: the backward's pre / postprocess with 4 row groups per block (branch wip-prepost-groups: every
# load issued before the first row sum, one sequence decode per block; s45e measured varlen's per-block cu_seqlens
# reads at +7 us each on uniform 512). Libraries: build/pp/ (the branch) and build/fin45/ (main), carried as
# build/s45k.tar.xz. 1. The native backward tests (test_hopper_bwd.py, and test_hopper.py's gradient / dlse / sinks
# ones) on pp. 2. Whole backward, pp x main: dense (bwd_build_ab.py, d64 / d128 / d256, 512 / 2k / 16k) and varlen
# (bwd_varlen_ab.py, d64 / d128, uniform 512 / 2048, mixed, short) with per-kernel times (--profile).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s45k s45k.tar.xz
export FA3NN_HOPPER_LIB=$PWD/build/pp/libfa3nn_hopper.so
stamp start
gpu_pytest tests_bwd.log 170 tests/test_hopper_bwd.py
gpu_log_summary "$out/tests_bwd.log"
gpu_pytest tests_grad.log 60 tests/test_hopper.py -k "grad or sinks"
gpu_log_summary "$out/tests_grad.log"
stamp tests
timeout 80 python3 scripts/bwd_build_ab.py --headdims 64 128 256 --seqlens 512 2048 16384 --rounds 3 \
    --compare main=build/fin45/libfa3nn_hopper.so --json "$out/dense.json" > "$out/dense.log" 2>&1
echo "dense rc $?"; grep -E "^\| " "$out/dense.log"
timeout 80 python3 scripts/bwd_varlen_ab.py --headdims 64 128 --varlen-cases 512 2048 mixed short --no-triton \
    --profile --compare main=build/fin45/libfa3nn_hopper.so --rounds 5 --json "$out/varlen.json" > "$out/varlen.log" 2>&1
echo "varlen rc $?"; grep -E "^\| |kernel us" "$out/varlen.log" | cut -c1-400
stamp ab
gpu_archive s45k.tgz
