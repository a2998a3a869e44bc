#!/usr/bin/env bash
# One device call for the Hopper FP8 forward: a smoke test, the GPU tests, then the kernel timing against our bf16
# forward. Everything lands under $OUT (logs, junit XML with each test's error numbers, bench JSON); the bench runs
# only when the smoke test passed. Expects a prebuilt library (FA3NN_HOPPER_LIB, default build/libfa3nn_hopper.so)
# so nothing compiles on the device.
#
#   OUT=/tmp/out bash scripts/gpu_check_fp8.sh
set -u
OUT=${OUT:-/tmp/fa3nn-fp8-check}
mkdir -p "$OUT"
export FA3NN_HOPPER_LIB=${FA3NN_HOPPER_LIB:-$PWD/build/libfa3nn_hopper.so}
export PYTHONPATH=$PWD
T=tests/test_hopper_fp8.py
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm --format=csv > "$OUT/gpu.txt" 2>&1

timeout "${SMOKE_S:-45}" python -m pytest -q -x -p no:cacheprovider \
  "$T::test_matches_emulation_per_tile[128-False-1024x1024-mha]" \
  "$T::test_matches_emulation_per_tile[128-True-511x1537-gqa]" \
  "$T::test_matches_emulation_per_tile[128-False-239x1-mha]" > "$OUT/smoke.log" 2>&1
smoke=$?
echo "smoke rc $smoke" | tee -a "$OUT/summary.txt"

timeout "${TESTS_S:-80}" python -m pytest -q -m gpu -n 8 -p no:cacheprovider --junitxml="$OUT/junit.xml" "$T" \
  > "$OUT/tests.log" 2>&1
echo "tests rc $?" | tee -a "$OUT/summary.txt"

if [ "$smoke" -eq 0 ]; then
  timeout "${BENCH_S:-70}" python scripts/bench_hopper_fp8.py --json "$OUT/bench.json" > "$OUT/bench.log" 2>&1
  echo "bench rc $?" | tee -a "$OUT/summary.txt"
fi
tail -n 15 "$OUT/smoke.log"
grep -E "passed|failed|error" "$OUT/tests.log" | tail -n 5
grep -E "^(FAILED|ERROR)" "$OUT/tests.log" | head -n 20
tail -n 16 "$OUT/bench.log" 2>/dev/null
