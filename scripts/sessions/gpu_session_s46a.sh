#!/usr/bin/env bash
# Forty-sixth session, first call: what the forty-fifth landed after its device time ran out. 1. The uniform-varlen
# schedule rule (varlen of one length takes the dense persistent rule, ctas -2): bwd_varlen_ab.py, this build x
# build/fin45/ (main before the rule) on the same packed calls, d64 / d128, uniform 512 / 2048, mixed, short. 2. Every
# GPU test on main's code with the rule (build/s46/), including the new window sides up to 2**31 - 1 (forward and
# backward) and the per-call torch.func / forward-AD check. Libraries carried as build/s46a.tar.xz.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s46a s46a.tar.xz
export FA3NN_HOPPER_LIB=$PWD/build/s46/libfa3nn_hopper.so
stamp start
cat "$out/gpu_state.txt"
timeout 120 python3 scripts/bwd_varlen_ab.py --headdims 64 128 --varlen-cases 512 2048 mixed short --no-triton \
    --compare main=build/fin45/libfa3nn_hopper.so --rounds 5 --json "$out/varlen.json" > "$out/varlen.log" 2>&1
echo "varlen rc $?"; grep -E "^\| " "$out/varlen.log" | cut -c1-300
stamp ab
gpu_pytest tests_all.log 330 tests/
gpu_log_summary "$out/tests_all.log"
stamp "all tests"
gpu_archive s46a.tgz
