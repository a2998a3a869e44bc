#!/usr/bin/env bash
# Forty-fifth session, last call: every GPU test on main's final code (the helpers' FP8 state / recipe switch, pretrain
# and HF refusal commits after s45h), library build/fin45/ (main's kernels; no kernel change since), carried as
# build/s45c.tar.xz.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s45j s45c.tar.xz
export FA3NN_HOPPER_LIB=$PWD/build/fin45/libfa3nn_hopper.so
stamp start
cat "$out/gpu_state.txt"
gpu_pytest tests_all.log 290 tests/
gpu_log_summary "$out/tests_all.log"
stamp "all tests"
gpu_archive s45j.tgz
