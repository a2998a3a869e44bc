#!/usr/bin/env bash
# 2026-12-01 eighth session, third call: the promoted FP8 defaults (d128 192-key serial where block_k allows, d64 and
# d256 128-key serial) through every FP8 GPU test, then issue 5's table: scripts/bench.py end to end (quantization
# + kernel), kernel only and quantization only, beside our bf16 forward and cuDNN bf16 at d64/d128/d256, and
# cuDNN's FP8 forward (e4m3 output) beside our kernel in one run (bench_cudnn_fp8.py).
# Carry build/libfa3nn_hopper.so and .whl (cudnn-frontend).
#   bash scripts/sessions/gpu_session_fp8table.sh [HEADDIMS...]     (default 64 128 256; 2026-12-02: 128 alone, after the
#   fused-turn kernel became the d128 default)
set -u
headdims=${*:-64 128 256}
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-fp8table
stamp tests
gpu_pytest tests_fp8.log 200 tests/ -k "fp8 or FP8"
grep -E "^(FAILED|ERROR)" "$out/tests_fp8.log" | head -12
stamp bench
timeout 300 python3 scripts/bench.py --backends hopper-fp8 hopper cudnn --headdims $headdims \
    --seqlens 512 1024 2048 4096 8192 16384 --directions fwd --out-dir "$out" --tag fp8table > "$out/bench.log" 2>&1
echo "bench rc $?"; grep -E "^\|" "$out/bench.log" | tail -n 38
cudnn_headdims=$(for d in $headdims; do [ "$d" != 64 ] && echo "$d"; done)
if [ -n "$cudnn_headdims" ]; then  # cuDNN's FP8 comparison at d128/d256 only
    stamp cudnn
    gpu_wheels "$out/wheels" "nvidia_cudnn_frontend-*.whl"
    timeout 120 python3 scripts/bench_cudnn_fp8.py --json "$out/cudnn_fp8.json" --headdims $cudnn_headdims \
        --seqlens 2048 4096 8192 16384 --cudnn-outputs e4m3 --iters 10 --reps 3 > "$out/cudnn_fp8.log" 2>&1
    echo "cudnn rc $?"; sed -n '/^| hdim/,$p' "$out/cudnn_fp8.log"
    rm -rf "$out/wheels"
fi
stamp done
gpu_archive fp8table.tgz
