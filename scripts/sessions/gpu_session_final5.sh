#!/usr/bin/env bash
# 2026-12-01 fifth session, last call: (1) every GPU test (`pytest -m gpu`, 8 workers) on the final build (d256
# short calls on 128 x 48 tiles with Q double-buffered, the lazy O rescale, the one-pair causal deal); (2) the
# integrated bench's d256 group (hopper / triton / cuDNN / FA2) from the final code. Carry build/libfa3nn_hopper.so.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-final5
stamp tests
gpu_pytest tests_all.log 300 tests/
stamp "bench d256"
timeout 200 python3 scripts/bench.py --backends hopper triton cudnn fa2 --headdims 256 --precompile 12 \
    --out-dir "$out" --tag final-d256 > "$out/final-d256.log" 2>&1
echo "bench rc $?"; grep -E "^\| 256 " "$out/final-d256.md" | cut -d'|' -f2-5,11,17,18,21-24
gpu_archive final5.tgz
stamp done
