#!/usr/bin/env bash
# Issue 7's run on NGPU GPUs of one host: llama-1b at seqlen 4096, bf16, FSDP2 (plain single-GPU training for
# NGPU=1), the same per-GPU batch at every size (8 sequences x 4096 tokens per GPU per optimizer step: micro-batch
# 4, two accumulation steps), three runs from one invocation: fa3nn, fa3nn with the FP8 per-tile recipe, SDPA
# (cuDNN). NCCL's NVLink multicast stays off. Results (JSON with every log line, the run's log) under $OUT.
#
#   bash scripts/gpu_scaling_run.sh NGPU [STEPS] [MODEL]        e.g. bash scripts/gpu_scaling_run.sh 8 320
# FP8=0 leaves the FP8 run out; extra section.field=value overrides for every run go in $OVERRIDES.
set -uo pipefail
ngpu=${1:?number of GPUs: 1, 2 or 8}
steps=${2:-320}
model=${3:-llama-1b}
out=${OUT:-benchmarks/results/scaling}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TOKENIZERS_PARALLELISM=false
[ -f build/libfa3nn_hopper.so ] && export FA3NN_HOPPER_LIB=$PWD/build/libfa3nn_hopper.so
case $ngpu in
    1) config=configs/accelerate/1gpu.yaml ;;
    2) config=configs/accelerate/2gpu-fsdp2.yaml ;;
    8) config=configs/accelerate/8gpu-fsdp2.yaml ;;
    *) echo "NGPU must be 1, 2 or 8 (the shipped accelerate configs), got $ngpu" >&2; exit 2 ;;
esac
name=$model-s4096-${ngpu}gpu
nvidia-smi --query-gpu=index,name,clocks.max.sm,memory.total --format=csv > "$out/$name-gpus.txt"
fp8_args=(--fp8 per_tile)
[ "${FP8:-1}" = 0 ] && fp8_args=()
# shellcheck disable=SC2086  # OVERRIDES is a list of words
accelerate launch --config_file "$config" recipes/compare_attention.py --config "$model" "${fp8_args[@]}" \
    --out "$out/$name.json" --run-root "/tmp/runs/$name" \
    data.seq_len=4096 data.max_corpus_mb=64 run.micro_batch_size=4 run.global_batch_size=$((8 * ngpu)) \
    run.max_steps="$steps" run.warmup_steps_excluded=20 run.log_every=10 run.save_every=1000000 ${OVERRIDES:-} \
    2>&1 | tee "$out/$name.log" | grep -E "^(attention|fa3nn|sdpa|largest)"
