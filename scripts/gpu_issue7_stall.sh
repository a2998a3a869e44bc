#!/usr/bin/env bash
# Issue 7 diagnostic on a 2-GPU host: where does the one ~10 s step of the 2-GPU llama-1b runs come from (step 42 of
# every run in scripts/gpu_issue7_pair.sh)? fa3nn only, FSDP2, the same config, every step logged (run.log_every=1),
# STEPS steps, with nvidia-smi dmon (clocks, power, temperature per second) recording beside it, and every thread's
# Python stack written when a step outlasts 3 s (run.stall_dump_s; stalls-rank*.txt). Needs .whl/ wheels.
#
#   bash scripts/gpu_issue7_stall.sh [STEPS] [LIMIT_S]
# GC_OFF=1 starts every Python process with automatic garbage collection disabled (a sitecustomize.py), to test
# whether the stall is a full (generation 2) collection.
set -u
steps=${1:-100}
limit_s=${2:-300}
source "$(dirname "$0")/gpu_env.sh"
gpu_setup /tmp/fa3nn-stall
gpu_wheels /tmp/site "*.whl"
export NCCL_NVLS_ENABLE=0 TOKENIZERS_PARALLELISM=false
if [ "${GC_OFF:-0}" = 1 ]; then
    mkdir -p /tmp/gcoff && echo "import gc; gc.disable()" > /tmp/gcoff/sitecustomize.py
    export PYTHONPATH=/tmp/gcoff:$PYTHONPATH
fi
nvidia-smi dmon -s pcu -d 1 > "$out/dmon.txt" 2>&1 &
dmon=$!
timeout "$limit_s" accelerate launch --config_file configs/accelerate/2gpu-fsdp2.yaml recipes/pretrain.py \
    --config llama-1b --no-wandb --run-dir /tmp/runs/stall data.seq_len=4096 data.max_corpus_mb=64 \
    data.keep_boundaries=false run.micro_batch_size=4 run.global_batch_size=16 run.max_steps="$steps" \
    run.warmup_steps_excluded=5 run.log_every=1 run.save_every=1000000 run.stall_dump_s=3 > "$out/train.log" 2>&1
echo "train rc $?"
kill "$dmon" 2>/dev/null
# steps whose window (one step) ran below half the median rate
python3 - "$out/train.log" <<'PY'
import re, statistics, sys
rows = [(int(m.group(1)), float(m.group(2).replace(',', ''))) for m in
        re.finditer(r"step\s+(\d+) \|.*?tok/s ([\d,]+)", open(sys.argv[1]).read())]
med = statistics.median(r for _, r in rows) if rows else 0
print(f"{len(rows)} steps logged, median {med:,.0f} tok/s; slow steps:", [(s, round(r)) for s, r in rows if r < med / 2])
PY
cp /tmp/runs/stall/stalls-rank*.txt "$out"/ 2>/dev/null
grep -c "Timeout" "$out"/stalls-rank*.txt 2>/dev/null
gpu_archive stall.tgz
