#!/usr/bin/env bash
# One device call for the Hopper FP8 forward: a smoke test, the GPU tests, then the kernel timing against our bf16
# forward. Everything lands under $OUT (logs, junit XML with each test's error numbers, bench JSON). The bench runs
# only when the smoke test passed; the suite only when the smoke test finished (a hang would only hang it too). Expects a prebuilt library (FA3NN_HOPPER_LIB, default build/libfa3nn_hopper.so)
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

timeout "${SMOKE_S:-45}" python -m pytest -v -p no:cacheprovider \
  "$T::test_matches_emulation_per_tile[128-False-1024x1024-mha]" \
  "$T::test_matches_emulation_per_tile[128-True-511x1537-gqa]" \
  "$T::test_matches_emulation_per_tile[128-False-239x1-mha]" > "$OUT/smoke.log" 2>&1
smoke=$?
echo "smoke rc $smoke" | tee -a "$OUT/summary.txt"

if [ "$smoke" -eq 0 ] || [ "$smoke" -eq 1 ]; then
  # -v: each result is printed with its test name as it completes, so a run cut by its timeout still says which
  # tests passed and failed (the first H200 run, with -q, left only dots).
  timeout "${TESTS_S:-150}" python -m pytest -v -m gpu -n 8 -p no:cacheprovider --junitxml="$OUT/junit.xml" \
    -k "not benchmark_variant" "$T" > "$OUT/tests.log" 2>&1
  echo "tests rc $?" | tee -a "$OUT/summary.txt"
fi

if [ "$smoke" -eq 0 ]; then
  # The benchmark variants are tested (and timed) only after the default passed its smoke test, in their own run:
  # a variant that hangs must not take the default's results with it.
  timeout "${VARIANTS_S:-60}" python -m pytest -v -m gpu -n 8 -p no:cacheprovider \
    --junitxml="$OUT/junit-variants.xml" -k "benchmark_variant" "$T" > "$OUT/variants.log" 2>&1
  variants=$?
  echo "variants rc $variants" | tee -a "$OUT/summary.txt"
  if [ "$variants" -eq 0 ]; then variant_args=(); else variant_args=(--variants); fi
  # SM clock and power while the bench runs: FP8 tensor work throttles clocks, which the TFLOP/s alone hide.
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv -lms 250 > "$OUT/clocks.csv" 2>&1 &
  sampler=$!
  timeout "${BENCH_S:-120}" python scripts/bench_hopper_fp8.py --json "$OUT/bench.json" "${variant_args[@]}" \
    > "$OUT/bench.log" 2>&1
  echo "bench rc $?" | tee -a "$OUT/summary.txt"
  kill "$sampler" 2>/dev/null
fi
tail -n 15 "$OUT/smoke.log"
grep -E "passed|failed|error" "$OUT/tests.log" 2>/dev/null | tail -n 5
grep -hE "(FAILED|ERROR)" "$OUT/tests.log" "$OUT/variants.log" 2>/dev/null | head -n 20
grep -E "passed|failed" "$OUT/variants.log" 2>/dev/null | tail -n 2
tail -n 16 "$OUT/bench.log" 2>/dev/null
