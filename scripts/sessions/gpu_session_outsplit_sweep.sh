#!/usr/bin/env bash
# 2026-12-02 (thirteenth session): tile sweeps of the output split's kernels (configs "dv", "dk"; whole backward
# TFLOP/s with the other split kernel at its pinned tile) at head dim $HD (default 128), the lengths in $SEQLENS
# (default "2048 16384"), score orientation $QM (0 key-major, default; 1 query-major), causal per $CAUSAL (both).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-outsplit-sweep
export FA3NN_TRITON_DKDV_QUERY_MAJOR=${QM:-0}
for seqlen in ${SEQLENS:-2048 16384}; do
    stamp "sweep $seqlen"
    gpu_sweep "${HD:-128}" "$seqlen" "sweep_d${HD:-128}_qm${QM:-0}_$seqlen" ${KINDS:-dv dk}
done
stamp done
gpu_archive outsplit_sweep.tar.gz
