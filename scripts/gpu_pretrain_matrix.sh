#!/usr/bin/env bash
# Issue 6's GPU runs in one device call on a 2-GPU host: fa3nn vs SDPA (cuDNN) with recipes/compare_attention.py for
# llama-125m and llama-350m at seqlen 2048 and 8192, on 1 GPU, 2 GPUs DDP and 2 GPUs FSDP2, at the same per-GPU batch
# (16384 tokens per GPU per optimizer step, no accumulation) so the 1 -> 2 GPU scaling is read at fixed work per GPU.
# The four 1-GPU comparisons run two at a time, one per GPU (independent processes); the 2-GPU ones one after
# another. A job starts only if the time left covers its estimate, so a budget cut drops whole jobs, never half of one.
#
#   bash scripts/gpu_pretrain_matrix.sh [STEPS_1GPU] [STEPS_2GPU] [BUDGET_SECONDS]   (results and logs under $OUT)
#
# ONE_GPU=0 skips the 1-GPU rows; JOBS="2gpu-ddp:llama-125m:8192 ..." runs only those 2-GPU jobs (in the script's order), to
# finish a matrix that an earlier call's budget cut.
set -uo pipefail
steps_one=${1:-200}
steps_two=${2:-100}
budget=${3:-540}
out=${OUT:-benchmarks/results/pretrain-matrix}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TOKENIZERS_PARALLELISM=false
[ -f build/libfa3nn_hopper.so ] && export FA3NN_HOPPER_LIB=$PWD/build/libfa3nn_hopper.so
start=$(date +%s)
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv | tee "$out/gpu_state.txt"

micro() { [ "$1" = 2048 ] && echo 8 || echo 2; }  # sequences per GPU: 16384 tokens either way

# compare MODE MODEL SEQLEN [GPU]: MODE is 1gpu, 2gpu-ddp or 2gpu-fsdp2 (configs/accelerate/MODE.yaml)
compare() {
    local mode=$1 model=$2 seq=$3 gpu=${4:-all} nproc=1 steps=$steps_one name
    [ "$mode" != 1gpu ] && nproc=2 && steps=$steps_two
    name=$model-s$seq-$mode
    local m; m=$(micro "$seq")
    local gpu_arg=(); [ "$mode" = 1gpu ] && gpu_arg=(--gpu_ids "$gpu")
    echo "[$(( $(date +%s) - start ))s] start $name"
    accelerate launch --config_file "configs/accelerate/$mode.yaml" "${gpu_arg[@]}" \
        --main_process_port $((29500 + RANDOM % 1000)) recipes/compare_attention.py --config "$model" \
        --out "$out/$name.json" --run-root "/tmp/runs/$name" \
        data.seq_len="$seq" data.max_corpus_mb=24 run.micro_batch_size="$m" run.global_batch_size=$((m * nproc)) \
        run.max_steps="$steps" optim.warmup_steps=20 run.log_every=10 run.save_every=1000000 run.wandb=false \
        > "$out/$name.log" 2>&1
    local rc=$?
    echo "[$(( $(date +%s) - start ))s] end $name (exit $rc)"; tail -n 4 "$out/$name.log"
}

# fits SECONDS: true if a job estimated at SECONDS still fits the budget
fits() { [ $(( $(date +%s) - start + $1 )) -le "$budget" ]; }

# 1 GPU: both GPUs busy with independent comparisons, split so both chains take about as long (model FLOPs per step
# over the ~170 TFLOP/s the 125m run reached on one H200, plus ~25 s of start-up per run).
if [ "${ONE_GPU:-1}" != 0 ]; then
    ( compare 1gpu llama-350m 2048 0; compare 1gpu llama-125m 2048 0 ) &
    ( compare 1gpu llama-350m 8192 1; compare 1gpu llama-125m 8192 1 ) &
    wait
fi
# 2 GPUs, the most informative first (DDP for the small model, FSDP2 for the larger one); estimates in seconds for
# both runs of a comparison at 100 steps.
estimates=("2gpu-ddp llama-125m 2048 65" "2gpu-fsdp2 llama-350m 2048 105" "2gpu-ddp llama-125m 8192 80"
           "2gpu-fsdp2 llama-350m 8192 125" "2gpu-fsdp2 llama-125m 2048 70" "2gpu-ddp llama-350m 2048 105"
           "2gpu-fsdp2 llama-125m 8192 85" "2gpu-ddp llama-350m 8192 125")
for job in "${estimates[@]}"; do
    set -- $job
    if [ -n "${JOBS:-}" ] && [[ " $JOBS " != *" $1:$2:$3 "* ]]; then continue; fi
    # the estimate is for 100 steps; scale its compute part (all but ~50 s of start-up) to the steps asked for
    if fits $(( 50 + ($4 - 50) * steps_two / 100 )); then compare "$1" "$2" "$3"; else echo "skipped (budget): $1 $2 $3"; fi
done
python scripts/pretrain_matrix_table.py "$out" | tee "$out/summary.md"
# The device tool brings back only a few files from $OUT: the histories and logs travel as one archive.
tar czf "$out/runs.tgz" -C "$out" $(cd "$out" && ls *.json *.log) && (cd "$out" && rm -f ./*.json ./*.log)
