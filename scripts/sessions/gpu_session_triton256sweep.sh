#!/usr/bin/env bash
# 2026-12-01 (fourth session): Triton d256 forward and dQ tile sweeps at 1024 and 2048 (the forward is 1.00-1.19x
# FA2 there against issue 3's 1.2x; dQ 64x32/4w was never swept on the current code).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-triton256sweep
for seqlen in 1024 2048; do
    stamp "sweep d256 $seqlen"
    gpu_sweep 256 "$seqlen" "tune_d256_$seqlen" fwd dq
done
stamp done
