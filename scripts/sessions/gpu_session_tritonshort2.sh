#!/usr/bin/env bash
# 2026-12-01 (fourth session): the 4-warp short-call Triton tiles from the sweep (results/tritonshort-…-1308) as
# defaults: (1) the Triton GPU suite; (2) scripts/bench.py triton / cuDNN / FA2 at d64 and d128, 512-2048;
# (3) the same sweep at d64 2048 and 4096 (forward and dK/dV), the next bucket.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-tritonshort2
stamp tests
gpu_pytest tests_triton.log 150 tests/test_triton_gpu.py
stamp bench
timeout 200 python3 scripts/bench.py --backends triton cudnn fa2 --headdims 64 128 --seqlens 512 1024 2048 \
    --out-dir "$out" --tag short --precompile 8 > "$out/bench_short.log" 2>&1
echo "bench rc $?"; grep -E "^\| (64|128) " "$out/short.md" | cut -d'|' -f2-4,5,6,8,9,11,12,14-
for seqlen in 2048 4096; do
    stamp "sweep d64 $seqlen"
    gpu_sweep 64 "$seqlen" "tune_d64_$seqlen" fwd dkdv
done
stamp done
