#!/usr/bin/env bash
# 2026-12-02 (sixteenth session), the final code: d256 forward 64x128/4w/1, dQ 64x64/4w/2 and (up to 1k) dV
# 64x64/4w/1, all through the batched descriptor views. (1) the Triton GPU suite; (2) the d256 rows of the table of
# record, triton / cuDNN / FA2 in one run, forward and backward.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-final16
stamp tests
gpu_pytest tests_triton.log 170 tests/test_triton_gpu.py
stamp bench
gpu_bench final16_256 300 --headdims 256
stamp done
gpu_archive final16.tar.gz
