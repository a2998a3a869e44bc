#!/usr/bin/env bash
# 2026-12-03 (twenty-first session): every GPU test (pytest -m gpu, 12 workers; failures rerun alone) on the
# session's final native build (the FP8 d128 row-sum default). Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s21h
stamp tests
gpu_all_tests 300 120
stamp done
gpu_archive s21h.tar.gz
