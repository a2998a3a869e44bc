#!/usr/bin/env bash
# 2026-12-03 (twenty-third session): every GPU test (pytest -m gpu, 12 workers; failures rerun alone) on the
# session's final tree (fast_exp2 in the recipes and fa3nn::fwd_fp8; the native library as built for s23d, kernel
# sources changed since in comments only). Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s23f
stamp tests
gpu_all_tests 330 150
stamp done
