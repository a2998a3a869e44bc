#!/usr/bin/env bash
# Planned for the second GPU call after the thirty-second session: every GPU test on the bwd-softcap library (the
# whole suite last ran on the thirty-first session's s31e library, before the softcap forward), failures rerun alone.
# Carry build.
set -u
source "$(dirname "$0")/gpu_env.sh"
gpu_setup /tmp/fa3nn-s33b
stamp start
TEST_WORKERS=8 RERUN_MAX=150 gpu_all_tests 420 120
stamp done
