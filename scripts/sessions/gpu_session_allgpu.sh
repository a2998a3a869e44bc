#!/usr/bin/env bash
# 2026-12-01 (fourth session), last call: every GPU test (pytest -m gpu: native forward / backward / FP8, Triton,
# Triton FP8, reference on GPU, bad inputs) on the final HEAD build (build/libfa3nn_hopper.so, carried).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-allgpu
stamp tests
timeout 240 python -m pytest -m gpu -n 12 -q -rfE -p no:cacheprovider tests/ > "$out/tests_all.log" 2>&1
echo "tests rc $?"; grep -E "^(FAILED|ERROR)" "$out/tests_all.log" | head -15; tail -n 2 "$out/tests_all.log"
stamp done
