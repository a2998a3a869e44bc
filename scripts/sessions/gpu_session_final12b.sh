#!/usr/bin/env bash
# 2026-12-02 (twelfth session), after query-major scores at d128 causal up to 4k (configs.QUERY_MAJOR): (1) the
# Triton GPU suite; (2) the integrated bench at d128, triton / cuDNN / FA2, every length (d64's rows: final12).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-final12b
stamp tests
gpu_pytest tests_triton.log 150 tests/test_triton_gpu.py
stamp bench
timeout 240 python3 scripts/bench.py --backends triton cudnn fa2 --headdims 128 --out-dir "$out" --tag final12b \
    --precompile 12 > "$out/bench_final12b.log" 2>&1
echo "bench rc $?"; grep -E "^\| 128 " "$out/final12b.md" | cut -d'|' -f2-4,5,6,8,9,11,12,14-
stamp done
gpu_archive final12b.tar.gz
