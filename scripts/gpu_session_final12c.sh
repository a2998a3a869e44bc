#!/usr/bin/env bash
# 2026-12-02 (twelfth session), last call: the Triton GPU suite and the d256 bench rows after the split dK/dV tile
# change at 1k-4k non-causal.
set -u
source "$(dirname "$0")/gpu_env.sh"
gpu_setup /tmp/fa3nn-final12c
stamp tests
gpu_pytest tests_triton.log 100 tests/test_triton_gpu.py
stamp bench
timeout 110 python3 scripts/bench.py --backends triton fa2 --headdims 256 --directions bwd --seqlens 2048 4096 \
    --out-dir "$out" --tag final12c --precompile 12 > "$out/bench_final12c.log" 2>&1
echo "bench rc $?"; grep -E "^\| 256 " "$out/final12c.md"
stamp done
gpu_archive final12c.tar.gz
