#!/usr/bin/env bash
# 2026-12-01 (fourth session), last Triton call: the tile tables after today's sweeps (d64 4-warp tiles, d128
# dK/dV 32x64/4w up to 4k, d256 split dK/dV and 128x64 forward). (1) the Triton GPU suite; (2) the integrated
# bench at d64 and d128, triton / cuDNN / FA2, every length (d256's rows: results/d256wg-…-1258).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-tritonfinal
stamp tests
gpu_pytest tests_triton.log 150 tests/test_triton_gpu.py
stamp bench
timeout 300 python3 scripts/bench.py --backends triton cudnn fa2 --headdims 64 128 --out-dir "$out" --tag final \
    --precompile 12 > "$out/bench_final.log" 2>&1
echo "bench rc $?"; grep -E "^\| (64|128) " "$out/final.md" | cut -d'|' -f2-4,5,6,8,9,11,12,14-
stamp done
