#!/usr/bin/env bash
# Prepared 2026-12-03 (eighteenth session) for the next one: where the period of the three-consumer d128 FP8 kernel
# goes (variant 35, fused_turn_w3: 128-key blocks, 160 registers; +15-27% over two consumers on 128-key blocks, about
# the default's rate; NOTES "s18d") against the default (256-key split S), from the clock64 trace
# (benchmarks/micro/fp8_trace.cu, now recording three warpgroups), 16k non-causal and 4k causal. Then both built
# without the trace for their plain TFLOP/s. Compiles here on the device (no carry needed, ~2 min of nvcc).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-next19
mkdir -p build
stamp build
flags="-gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -DFA3NN_HANG_GUARD -I kernels/hopper"
(nvcc $flags -DFA3NN_FP8_TRACE -o build/fp8_trace benchmarks/micro/fp8_trace.cu > "$out/nvcc_trace.log" 2>&1;
 echo "trace build rc $?") &
(nvcc $flags -o build/fp8_notrace benchmarks/micro/fp8_trace.cu > "$out/nvcc_notrace.log" 2>&1;
 echo "plain build rc $?") &
wait
stamp trace
for args in "16384 0 0" "16384 0 35" "4096 1 0" "4096 1 35"; do
    timeout 60 build/fp8_trace $args > "$out/trace_${args// /_}.log" 2>&1
    echo "trace $args rc $?"; grep -E "TFLOP|wg [0-9]:" "$out/trace_${args// /_}.log"
    timeout 60 build/fp8_notrace $args | tail -n 1
done
stamp done
gpu_archive next19.tar.gz
