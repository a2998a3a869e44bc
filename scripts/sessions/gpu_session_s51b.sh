#!/usr/bin/env bash
# s51b: every GPU test (pytest -m gpu) on build/s51o (C ABI 9, s50o + grid_order 3; branch wip/bwd-outer-few-pairs), the first whole-suite
# run on the GQA-parts kernels (s50a ran the backward's tests on the ABI-8 library, s50c only the parts tests).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s51b s51o.tar.xz
export FA3NN_HOPPER_LIB=$PWD/build/s51o/libfa3nn_hopper.so
stamp start
cat "$out/gpu_state.txt"
gpu_all_tests 450 90
stamp "all tests"
