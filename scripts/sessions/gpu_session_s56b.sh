#!/usr/bin/env bash
# s56b: every GPU test on build/s56f (branch wip/fp8-few-pair-deal: c28bd39's kernels, the forward's few-pair deal and
# the backward's d64 outermost bound at 48 pairs, plus the few-pair rule for dense FP8 calls), the first whole-suite
# run since s54a (2854 passed on an H100) and, on an H200, the first there since s50. Carry build/s56f.tar.xz.
# TESTS_LIMIT / RERUN_LIMIT: the two stages' seconds (420 / 60; after s56a in one call: what is left of it).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_start /tmp/fa3nn-s56b s56f
gpu_all_tests "${TESTS_LIMIT:-420}" "${RERUN_LIMIT:-60}"
stamp "all tests"
