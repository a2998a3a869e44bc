#!/usr/bin/env bash
# Forty-sixth session: 1. The uniform-varlen schedule rule landed after the forty-fifth's device time (varlen of one
# length takes the dense persistent rule, ctas -2): bwd_varlen_ab.py, main's build (build/s46/) x build/fin45/ (main
# before the rule) on the same packed calls, d64 / d128, uniform 512 / 2048, mixed, short. 2. Branch
# wip-fwd-varlen-dynamic (the varlen forward's dynamic deal, FwdConfig::kDynamic), carried as a source tree
# build/dyn_src/ (the branch merged with main) with its library build/dynfinal/ (C ABI 6: main's Python cannot load
# it): every GPU test (with the new test_varlen_deals_agree and the window sides up to 2**31 - 1), then
# scripts/fwd_varlen_balance.py (dynamic x static deal, drawn and sorted orders, d64 / d128 / d256, 2048 /
# mixed / short). Carried as build/s46b.tar.xz.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s46b s46b.tar.xz
stamp start
cat "$out/gpu_state.txt"
FA3NN_HOPPER_LIB=$PWD/build/s46/libfa3nn_hopper.so timeout 100 python3 scripts/bwd_varlen_ab.py --headdims 64 128 \
    --varlen-cases 512 2048 mixed short --no-triton --compare main=build/fin45/libfa3nn_hopper.so --rounds 5 \
    --json "$out/varlen.json" > "$out/varlen.log" 2>&1
echo "varlen rc $?"; grep -E "^\| " "$out/varlen.log" | cut -c1-200
stamp "uniform rule"
root=$PWD
cd build/dyn_src
export FA3NN_HOPPER_LIB=$root/build/dynfinal/libfa3nn_hopper.so PYTHONPATH=$PWD
gpu_pytest tests_all.log 320 tests/
gpu_log_summary "$out/tests_all.log"
stamp tests
timeout 90 python3 scripts/fwd_varlen_balance.py --headdims 64 128 256 --cases 2048 mixed short --rounds 3 \
    --json "$out/fwd_balance.json" > "$out/fwd_balance.log" 2>&1
echo "fwd balance rc $?"; grep -E "^\| " "$out/fwd_balance.log"
stamp balance
cd "$root"
gpu_archive s46b.tgz
