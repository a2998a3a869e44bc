#!/usr/bin/env bash
# Issue 7 on a 2-GPU H200 host, current code and config (llama-1b, seqlen 4096, no activation checkpointing, 8 x 4096
# tokens per GPU per optimizer step): 1 GPU (fa3nn, SDPA) then 2 GPUs with FSDP2 (fa3nn, fa3nn FP8 per-tile, SDPA),
# so the 1 -> 2 GPU scaling comes from one machine in one call. Needs the datasets wheels of .whl/ carried.
#
#   bash scripts/gpu_issue7_pair.sh [STEPS] [ONE_S] [TWO_S]
set -u
steps=${1:-50}
one_s=${2:-200}
two_s=${3:-330}
source "$(dirname "$0")/gpu_env.sh"
gpu_setup /tmp/fa3nn-issue7
gpu_wheels /tmp/site "*.whl"
export NCCL_NVLS_ENABLE=0

CUDA_VISIBLE_DEVICES=0 FP8=0 OUT="$out" timeout "$one_s" bash scripts/gpu_scaling_run.sh 1 "$steps" \
    > "$out/one.log" 2>&1
echo "1 GPU rc $?"; tail -n 6 "$out/one.log"
OUT="$out" timeout "$two_s" bash scripts/gpu_scaling_run.sh 2 "$steps" > "$out/two.log" 2>&1
echo "2 GPU rc $?"; tail -n 8 "$out/two.log"
gpu_archive issue7.tgz
