#!/usr/bin/env bash
# Nineteenth session, first call: which pipes the FP8 softmax's instructions share and how long one warp's softmax
# takes alone (benchmarks/micro/pipe_probe.cu), then the trace prepared last session (gpu_session_next19.sh:
# default vs fused_turn_w3). Builds on the device (no carry).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s19a
mkdir -p build
nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -use_fast_math -o build/pipe_probe \
    benchmarks/micro/pipe_probe.cu > "$out/nvcc_probe.log" 2>&1 || { echo "probe build failed"; tail "$out/nvcc_probe.log"; }
stamp probe built
timeout 120 build/pipe_probe | tee "$out/pipe_probe.txt"
stamp probe done
OUT=$out bash scripts/sessions/gpu_session_next19.sh
