#!/usr/bin/env bash
# 2026-12-02 eleventh session, last call: every GPU test on the final build (8 workers: 12 ran the fp32 reference
# out of memory at d256 8192x8192 in allgpu-h200-20261202-0841), issue 5's d128 table (scripts/bench.py) and cuDNN's
# FP8 forward beside our defaults at d128 and d256. Carry build (libfa3nn_hopper.so) and .whl (cudnn-frontend).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-final11
stamp tests
gpu_pytest tests_all.log 300 tests/
grep -E "^(FAILED|ERROR)" "$out/tests_all.log" | head -12
stamp table
timeout 200 python3 scripts/bench.py --backends hopper-fp8 hopper cudnn --headdims 128 \
    --seqlens 512 1024 2048 4096 8192 16384 --directions fwd --out-dir "$out" --tag fp8table > "$out/bench.log" 2>&1
echo "bench.py rc $?"; grep -E "^\|" "$out/bench.log" | tail -n 14 | cut -d'|' -f1-7,11,18-21
stamp cudnn
gpu_wheels "$out/wheels" "nvidia_cudnn_frontend-*.whl"
timeout 120 python3 scripts/bench_cudnn_fp8.py --json "$out/cudnn_fp8.json" --headdims 128 256 \
    --seqlens 2048 4096 8192 16384 --cudnn-outputs e4m3 --iters 10 --reps 5 > "$out/cudnn_fp8.log" 2>&1
echo "cudnn rc $?"; sed -n '/^| hdim/,$p' "$out/cudnn_fp8.log"
rm -rf "$out/wheels"
stamp done
