#!/usr/bin/env bash
# 2026-12-02 (fourteenth session), the final code: d128's dK/dV kernel on key-major 64x64/4w/2 with descriptors at
# every length. (1) the Triton GPU suite; (2) the d128 backward table (triton / cuDNN / FA2), the table of record.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-final14b
stamp tests
gpu_pytest tests_triton.log 170 tests/test_triton_gpu.py
stamp bench128
gpu_bench final14b_128 200 --headdims 128 --directions bwd
stamp done
gpu_archive final14b.tar.gz
