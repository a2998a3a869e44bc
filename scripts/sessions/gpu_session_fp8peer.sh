#!/usr/bin/env bash
# 2026-12-02 eleventh session: where the FP8 d128 forward's time goes, against cuDNN's FP8 kernel on the same GPU.
#   1. The clock64 trace harness (benchmarks/micro/fp8_trace.cu; carry build/fp8_trace and build/fp8_notrace): the
#      default (variant 0) and the harness-only cuts 100 / 101 / 102 (the default without its exp2s / its row max
#      tree / its whole softmax; WRONG outputs), 16k non-causal, phases and TFLOP/s.
#   2. Nsight Compute (--set full, SASS page with per-instruction stall samples) of one launch of our default FP8
#      kernel and one of cuDNN's FP8 SDPA forward (cudnn-frontend, e4m3 out, per-tensor scales), d128 16k non-causal.
#   bash scripts/sessions/gpu_session_fp8peer.sh   (carry: build, .whl)
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-fp8peer
gpu_wheels /tmp/site "nvidia_cudnn_frontend-*.whl"

stamp "trace"
for v in 0 100 101 102; do
    timeout 60 build/fp8_trace 16384 0 $v > "$out/trace_$v.log" 2>&1; tail -n 12 "$out/trace_$v.log"
    timeout 60 build/fp8_notrace 16384 0 $v 2>&1 | tail -n 1
done

stamp "ncu ours"
gpu_ncu_fp8 ours full 120

stamp "ncu cudnn"
timeout 200 ncu --clock-control none --set full --import-source no -k "regex:fprop|fmha|sdpa" --launch-skip 1 \
    --launch-count 1 -f -o "$out/cudnn" python3 scripts/bench_cudnn_fp8.py --json "$out/cudnn_bench.json" \
    --headdims 128 --seqlens 16384 --causal no --cudnn-outputs e4m3 --iters 2 --reps 1 > "$out/cudnn.ncu.log" 2>&1
echo "cudnn rc $?"; tail -n 3 "$out/cudnn.ncu.log"
ncu -i "$out/cudnn.ncu-rep" --page details > "$out/cudnn.details.txt" 2>&1
ncu -i "$out/cudnn.ncu-rep" --page source --csv --print-source sass > "$out/cudnn.sass.csv" 2>&1
ncu -i "$out/cudnn.ncu-rep" --page raw > "$out/cudnn.raw.txt" 2>&1
grep -E "cudnn|Duration|SM Frequency|Issue Slots Busy|Registers Per|Block Size|Grid Size|Dynamic Shared" \
    "$out/cudnn.details.txt" | head -n 12
for f in ours cudnn; do
    echo "== $f"; python3 scripts/ncu_sass_summary.py "$out/$f.sass.csv" 2>&1 | head -n 60
done > "$out/summary.txt"
head -c 6000 "$out/summary.txt"
rm -f "$out"/*.ncu-rep
gpu_archive fp8peer.tgz
stamp "done"
