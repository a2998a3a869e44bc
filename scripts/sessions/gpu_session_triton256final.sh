#!/usr/bin/env bash
# 2026-12-01 (fourth session): the d256 sweep's winners as defaults (forward 128x64/8w/3 stages through TMA, dQ
# 128x32/8w; results/triton256sweep-…-1322): (1) the Triton GPU suite; (2) the integrated d256 rows, triton /
# cuDNN / FA2.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-triton256final
stamp tests
gpu_pytest tests_triton.log 150 tests/test_triton_gpu.py
stamp bench
timeout 250 python3 scripts/bench.py --backends triton cudnn fa2 --headdims 256 --out-dir "$out" --tag final256 \
    --precompile 12 > "$out/bench_final256.log" 2>&1
echo "bench rc $?"; grep -E "^\| 256 " "$out/final256.md" | cut -d'|' -f2-4,5,6,8,9,11,12,14-
stamp done
