#!/usr/bin/env bash
# The end-of-session device call on one GPU, in stages with their own time limits so a hang in one stage (a new
# kernel) costs only that stage: (1) the GPU suite except the native FP8 tests, (2) the native FP8 forward (smoke
# test, its GPU tests, a timing against the bf16 forward), (3) a 100-step llama-125m fa3nn-vs-SDPA training spot
# check. Everything lands under $OUT in one archive (the device tool returns only a few files).
#
#   bash scripts/gpu_session_check.sh [SUITE_S] [FP8_S] [TRAIN_S]
set -u
suite_s=${1:-140}
fp8_s=${2:-130}
train_s=${3:-75}
out=${OUT:-/tmp/fa3nn-session-check}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
[ -f build/libfa3nn_hopper.so ] && export FA3NN_HOPPER_LIB=$PWD/build/libfa3nn_hopper.so
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > "$out/gpu_state.txt"

# -v: xdist prints every result with its name as it lands, so a run cut by its limit still names failures.
timeout "$suite_s" python -m pytest -m gpu -n 8 -v -rfE -p no:cacheprovider tests/ \
    --ignore=tests/test_hopper_fp8.py > "$out/gpu_tests.log" 2>&1
echo "suite rc $?"; grep -cE " PASSED" "$out/gpu_tests.log"; grep -E "(FAILED|ERROR) tests/" "$out/gpu_tests.log" | head -n 20

T=tests/test_hopper_fp8.py
third=$((fp8_s / 3))
timeout "$third" python -m pytest -v -p no:cacheprovider "$T::test_matches_emulation_per_tile[128-False-1024x1024-mha]" \
    "$T::test_matches_emulation_per_tile[128-True-511x1537-gqa]" > "$out/fp8_smoke.log" 2>&1
smoke=$?
echo "fp8 smoke rc $smoke"
if [ "$smoke" -le 1 ]; then
    timeout "$third" python -m pytest -v -m gpu -n 8 -p no:cacheprovider -k "not benchmark_variant" "$T" \
        > "$out/fp8_tests.log" 2>&1
    echo "fp8 tests rc $?"; grep -cE " PASSED" "$out/fp8_tests.log"; grep -E " (FAILED|ERROR)" "$out/fp8_tests.log" | head
fi
if [ "$smoke" -eq 0 ]; then
    timeout "$third" python scripts/bench_hopper_fp8.py --json "$out/fp8_bench.json" --variants > "$out/fp8_bench.log" 2>&1
    echo "fp8 bench rc $?"; tail -n 14 "$out/fp8_bench.log"
fi

timeout "$train_s" accelerate launch --config_file configs/accelerate/1gpu.yaml recipes/compare_attention.py \
    --config llama-125m --out "$out/llama-125m-s2048-1gpu.json" --run-root /tmp/runs/check data.seq_len=2048 \
    data.max_corpus_mb=24 run.micro_batch_size=8 run.global_batch_size=8 run.max_steps=100 optim.warmup_steps=20 \
    run.log_every=10 run.save_every=1000000 run.wandb=false > "$out/train.log" 2>&1
echo "train rc $?"; grep -E "^(attention|fa3nn|sdpa|largest)" "$out/train.log"
tar czf "$out/session_check.tgz" -C "$out" $(cd "$out" && ls | grep -v session_check.tgz)
