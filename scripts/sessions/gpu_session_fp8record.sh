#!/usr/bin/env bash
# 2026-12-01 sixth session: issue 5's FP8 table of record on the final code (fastdiv merged), split over calls by head
# dim (one bench.py call of both head dims at 6 lengths does not fit one 600 s call):
#   bash scripts/sessions/gpu_session_fp8record.sh HEADDIM BENCH_LIMIT_S [cudnn]
# (1) scripts/bench.py --backends hopper-fp8 hopper cudnn, forward, 512-16k, causal and not: the FP8 call end to end
# (default recipe: per-tile + incoherent), kernel only, quantization pass, our bf16 and cuDNN bf16 in one run;
# (2) with `cudnn`: cuDNN's FP8 attention (nvidia-cudnn-frontend, per-tensor scales, e4m3 output) against our kernel
# on the same per-tensor operands, d128 and d256, 4k-16k. Carry build/libfa3nn_hopper.so (and .whl/ is carried as
# an untracked, ignored path: pass it in `carry`).
set -u
hd=$1 limit=$2 with_cudnn=${3:-}
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-fp8record
stamp "bench d$hd"
timeout "$limit" python3 scripts/bench.py --backends hopper-fp8 hopper cudnn --directions fwd --headdims "$hd" \
    --causal both --reps 5 --out-dir "$out" --tag "fp8-record-d$hd" > "$out/fp8-record-d$hd.log" 2>&1
echo "bench rc $?"; sed -n '/^| hdim/,$p' "$out/fp8-record-d$hd.md" | grep -E "^\| [0-9]" | cut -d'|' -f2-6,11,14,18-21
if [ "$with_cudnn" = cudnn ]; then
    gpu_wheels "$out/wheels" "nvidia_cudnn_frontend-*.whl"
    stamp cudnn-fp8
    timeout 150 python3 scripts/bench_cudnn_fp8.py --json "$out/cudnn_fp8.json" --headdims 128 256 \
        --seqlens 4096 8192 16384 --cudnn-outputs e4m3 --reps 5 > "$out/cudnn_fp8.log" 2>&1
    echo "cudnn rc $?"; grep -E '^\| (128|256) ' "$out/cudnn_fp8.log"
    rm -rf "$out/wheels"
fi
gpu_archive "fp8record-d$hd.tgz"
stamp done
