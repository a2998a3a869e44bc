#!/usr/bin/env bash
# One device call (2026-12-02 twelfth session): the d64 dK/dV tile sweep of scripts/sessions/gpu_session_querymajor.sh at the
# other lengths (512, 1024, 2048, 8192), key-major and query-major (FA3NN_TRITON_DKDV_QUERY_MAJOR=1) scores.
#   bash scripts/sessions/gpu_session_querymajor2.sh
source scripts/gpu_env.sh
gpu_setup /tmp/querymajor2
for seqlen in 512 1024 2048 8192; do
    stamp "d64 $seqlen"
    gpu_sweep 64 "$seqlen" "keymajor64_$seqlen" dkdv
    FA3NN_TRITON_DKDV_QUERY_MAJOR=1 gpu_sweep 64 "$seqlen" "querymajor64_$seqlen" dkdv
done
stamp done
gpu_archive querymajor2.tar.gz
