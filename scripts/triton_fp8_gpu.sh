#!/usr/bin/env bash
# One device call for the Triton FP8 work: its GPU tests, then the FP8 bench rows beside our bf16 Triton and Hopper
# forwards and cuDNN (forward only, pinned tiles: FA3NN_TRITON_AUTOTUNE=0, plus a tile sweep of the FP8 kernel at the
# longest seqlen). Logs and results go to $OUT (else benchmarks/results).
# Usage: bash scripts/triton_fp8_gpu.sh [TEST_SECONDS] [BENCH_SECONDS]. The first run (55 s / 50 s) was cut short:
# compiling the test kernels on 8 workers and the bench's kernels took longer than that.
set -uo pipefail
test_seconds=${1:-180}
bench_seconds=${2:-150}
out=${OUT:-benchmarks/results}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 FA3NN_TRITON_AUTOTUNE=0
[ -f build/libfa3nn_hopper.so ] && export FA3NN_HOPPER_LIB=$PWD/build/libfa3nn_hopper.so
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
timeout "$test_seconds" python -m pytest -m gpu -q -n 8 -p no:cacheprovider tests/test_fp8_triton_gpu.py 2>&1 \
    | tee "$out/triton_fp8_gpu_tests.log" | tail -n 25
echo "pytest exit: ${PIPESTATUS[0]}"
# The target shapes (seqlen 16k) first, with the FP8 tile sweep; then the shorter ones.
timeout "$bench_seconds" python scripts/bench.py --backends triton triton-fp8 hopper cudnn --headdims 128 256 \
    --seqlens 16384 --directions fwd --iters 5 --reps 3 --rotate 2 --fp8-tile-sweep \
    --out-dir "$out" --tag triton_fp8_h200_16k 2>&1 | tee "$out/triton_fp8_bench_16k.log" | tail -n 12
timeout "$bench_seconds" python scripts/bench.py --backends triton triton-fp8 hopper cudnn --headdims 128 256 \
    --seqlens 2048 8192 --directions fwd --iters 5 --reps 3 --rotate 2 \
    --out-dir "$out" --tag triton_fp8_h200_short 2>&1 | tee "$out/triton_fp8_bench_short.log" | tail -n 14
echo "bench exit: ${PIPESTATUS[0]}"
