#!/usr/bin/env bash
# Planned for the second GPU call after the thirty-second session: every GPU test on the bwd-softcap library (the
# whole suite last ran on the thirty-first session's s31e library, before the softcap forward), failures rerun alone.
# Carry build.
set -u
source "$(dirname "$0")/gpu_env.sh"
gpu_setup /tmp/fa3nn-s33b
# The branch's library (ABI 2) where it was built apart from main's (build/bwd-softcap/, thirty-second session).
[ -f build/bwd-softcap/libfa3nn_hopper.so ] && export FA3NN_HOPPER_LIB=$PWD/build/bwd-softcap/libfa3nn_hopper.so
stamp start
TEST_WORKERS=8 RERUN_MAX=150 gpu_all_tests 420 120
stamp done
