#!/usr/bin/env bash
# s56b: every GPU test on main (build/s55p = c28bd39's kernels; the forward's few-pair deal, the backward's d64
# outermost bound at 48 pairs), the first whole-suite run since s54a (2854 passed on an H100) and, on an H200, the
# first there since s50.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_start /tmp/fa3nn-s56b s55p
gpu_all_tests 420 60
stamp "all tests"
