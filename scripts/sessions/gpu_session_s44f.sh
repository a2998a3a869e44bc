#!/usr/bin/env bash
# Forty-fourth session, last call: every GPU test on main's final code with its library (build/pub/ of s44d, built
# from the kernels main holds: the later kernel commit changed a comment only, SASS identical), carried as
# build/s44d.tar.xz. (s44d ran only the MLA tests; this covers the helpers' Python fixes and the varlen default.)
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s44f s44d.tar.xz
export FA3NN_HOPPER_LIB=$PWD/build/pub/libfa3nn_hopper.so
stamp start
gpu_pytest tests_all.log 280 tests/
gpu_log_summary "$out/tests_all.log"
stamp "all tests"
gpu_archive s44f.tgz
