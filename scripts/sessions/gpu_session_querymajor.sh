#!/usr/bin/env bash
# One device call (2026-12-02 twelfth session): the Triton dK/dV kernel's tiles swept with its scores as keys x
# queries (the default) and as queries x keys (FA3NN_TRITON_DKDV_QUERY_MAJOR=1), d64 at 4096 and 16384, d128 at 4096
# (fa3nn.backends.triton.tune: whole backward, the other kernels pinned).
#   bash scripts/sessions/gpu_session_querymajor.sh
source scripts/gpu_env.sh
gpu_setup /tmp/querymajor
for seqlen in 4096 16384; do
    stamp "d64 $seqlen"
    gpu_sweep 64 "$seqlen" "keymajor64_$seqlen" dkdv
    FA3NN_TRITON_DKDV_QUERY_MAJOR=1 gpu_sweep 64 "$seqlen" "querymajor64_$seqlen" dkdv
done
stamp "d128 4096"
gpu_sweep 128 4096 keymajor128_4096 dkdv
FA3NN_TRITON_DKDV_QUERY_MAJOR=1 gpu_sweep 128 4096 querymajor128_4096 dkdv
stamp done
