#!/usr/bin/env bash
# One device call for the 16-aligned packed vt8 layout (branch fp8-varlen, benchmarks/NOTES.md "FP8 varlen"), in
# stages with their own time limits, everything archived under $OUT:
#   1. native FP8 varlen tests: every (head dim, causal) with unaligned key starts, empty/one-key sequences, the
#      multiple-of-16 case that passed before, and the fused pass's operands in the kernel
#   2. native FP8 dense tests (the producer's Vt coordinate changed for every launch)
#   3. Triton FP8 varlen tests (the fused pass writes, and the Triton forward reads, the new layout)
#   4. timing: native FP8 varlen vs Triton FP8 varlen vs bf16 native varlen vs native FP8 dense, same run
# If stage 1 passes: delete the varlen branch of fa3nn.backends.hopper_fp8.refusal (and its test_refusal_reasons
# row), so dispatch sends FP8 varlen calls to the native kernel.
#
#   python -m fa3nn.backends.hopper_build --out build/libfa3nn_hopper.so   # on the CPU machine, carried
#   bash scripts/gpu_fp8_varlen_check.sh
set -u
source "$(dirname "$0")/gpu_env.sh"
gpu_setup /tmp/fa3nn-fp8-varlen

T=tests/test_hopper_fp8.py
timeout 150 python -m pytest -m gpu -v -rfE -p no:cacheprovider "$T" -k varlen --junitxml="$out/varlen.xml" \
    > "$out/native_varlen.log" 2>&1
echo "native fp8 varlen rc $?"; gpu_log_summary "$out/native_varlen.log"
timeout 150 python -m pytest -m gpu -v -rfE -p no:cacheprovider "$T" -k "not varlen and not benchmark_variant" \
    > "$out/native_dense.log" 2>&1
echo "native fp8 dense rc $?"; gpu_log_summary "$out/native_dense.log"
timeout 120 python -m pytest -m gpu -v -rfE -p no:cacheprovider tests/test_fp8_triton_gpu.py -k varlen \
    > "$out/triton_varlen.log" 2>&1
echo "triton fp8 varlen rc $?"; gpu_log_summary "$out/triton_varlen.log"
timeout 150 python scripts/bench_fp8_varlen.py --json "$out/fp8_varlen.json" > "$out/bench.log" 2>&1
echo "bench rc $?"; tail -n 8 "$out/bench.log"
