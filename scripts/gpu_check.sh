#!/usr/bin/env bash
# One device call that checks and measures the current tree on a GPU machine: the GPU test suite, then the benchmark
# at the FlashAttention-3 paper's shapes. Logs and results go to $OUT (the device tool's folder; else
# benchmarks/results). Usage: bash scripts/gpu_check.sh [TEST_SECONDS] [BENCH_SECONDS] [bench.py options...]
set -uo pipefail
test_seconds=${1:-200}
bench_seconds=${2:-280}
shift 2 || true
out=${OUT:-benchmarks/results}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
# A library built on the CPU machine (python -m fa3nn.backends.hopper_build --out build/libfa3nn_hopper.so) saves
# the device the compile; without it, the backend builds itself on first use.
[ -f build/libfa3nn_hopper.so ] && export FA3NN_HOPPER_LIB=$PWD/build/libfa3nn_hopper.so
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee "$out/gpu_state.txt"
timeout "$test_seconds" python -m pytest -m gpu -v -rfE -n 8 -p no:cacheprovider tests/ 2>&1 | tee "$out/gpu_tests.log" \
    | grep -E "(FAILED|ERROR|passed|failed)" | tail -n 25
echo "pytest exit: ${PIPESTATUS[0]}"
timeout "$bench_seconds" python scripts/bench.py --out-dir "$out" "$@" 2>&1 | tee "$out/bench.log" | tail -n 45
echo "bench exit: ${PIPESTATUS[0]}"
