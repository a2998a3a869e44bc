#!/usr/bin/env bash
# s21a: does one warpgroup's FP8 wgmma slow another warpgroup's softmax instructions on the same SM, and which?
# (benchmarks/micro/gemm_beside.cu, built here and carried as build/gemm_beside; NOTES "twenty-first session").
set -u
source scripts/gpu_env.sh
gpu_setup /tmp/s21a
stamp start
build/gemm_beside | tee "$out/gemm_beside.txt"
stamp "gemm_beside rc ${PIPESTATUS[0]}"
build/pipe_probe > "$out/pipe_probe.txt" 2>&1
stamp "pipe_probe rc $?"
tail -n 6 "$out/pipe_probe.txt"
