#!/usr/bin/env bash
# 2026-12-03 (seventeenth session), first call with the native library: every GPU test (pytest -m gpu) on e92ef1f's
# tree with a fresh build/libfa3nn_hopper.so (carried), the first whole-suite run since the eleventh session (the
# Triton suite alone ran after each Triton change since). Failures are rerun alone, one worker (12 workers sharing
# the GPU ran the fp32 reference of d256 8k out of memory before).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s17a
stamp tests
gpu_all_tests 300 200
stamp done
gpu_archive s17a.tar.gz
