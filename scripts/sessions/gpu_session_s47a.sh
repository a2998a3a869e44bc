#!/usr/bin/env bash
# Forty-seventh session, first call: every GPU test on main (590ffe1: the auto deal and the helpers' API fixes of the
# forty-sixth session had no whole-suite run on their final code), library build/dynfinal/ (main's kernels but
# for comments), carried as build/s47a.tar.xz with build/s46/ (main before the dynamic deal, C ABI 5) and its
# source tree build/s46_src/ (git archive c524553) for the next call's dense A/B.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s47a s47a.tar.xz
export FA3NN_HOPPER_LIB=$PWD/build/dynfinal/libfa3nn_hopper.so
stamp start
cat "$out/gpu_state.txt"
gpu_pytest tests_all.log 400 tests/
gpu_log_summary "$out/tests_all.log"
stamp tests
gpu_archive s47a.tgz
