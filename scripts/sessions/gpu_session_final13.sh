#!/usr/bin/env bash
# 2026-12-02 (thirteenth session), after the dQ kernel on a second stream (default) and the output split at d256
# (default): (1) the Triton GPU suite; (2) the integrated bench at d256 (triton / cuDNN / FA2, both directions);
# the backward at d128 and d64: gpu_session_final13b.sh.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-final13
stamp tests
gpu_pytest tests_triton.log 170 tests/test_triton_gpu.py
stamp bench256
timeout 190 python3 scripts/bench.py --backends triton cudnn fa2 --headdims 256 --out-dir "$out" --tag final13_256 \
    --precompile 12 > "$out/bench_final13_256.log" 2>&1
echo "bench rc $?"; grep -E "^\| 256 " "$out/final13_256.md"
stamp done
gpu_archive final13.tar.gz
