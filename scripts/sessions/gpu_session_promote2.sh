#!/usr/bin/env bash
# Prepared 2026-12-01 seventh session (no GPU was lent after 20:04), for the next session's first call: the
# promoted FP8 kernels with serial steps (the d64/d128 default on 128-key blocks, variant key_block_192_serial, and
# variant serial at d256 in two head-dim halves; the block accumulator shares the scores' registers) against the
# unpromoted kernels (no_promotion, key_block_192, d256's default): FP8 GPU suites, mean-of-V drift, kernel-only
# timing at d128 and d256, sustained 16k rates; then the Triton FP8 forward at head dim 256 (where auto sends FP8
# calls until hopper_fp8.NATIVE_PROMOTION_MEASURED is set) beside our bf16 and cuDNN.
# Carry build/libfa3nn_hopper.so and .whl (cudnn-frontend: does cuDNN's FP8 forward lose V's mean too?).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-promote2
stamp tests
gpu_pytest tests_fp8.log 200 tests/test_hopper_fp8.py tests/test_fp8_triton_gpu.py tests/test_fp8_api.py
grep -E "^(FAILED|ERROR)" "$out/tests_fp8.log" | head -12
stamp bias
timeout 150 python3 scripts/fp8_accumulation_bias.py --json "$out/bias.json" --headdims 128 256 --seqlens 4096 16384 \
    --variants full serial key_block_192_serial key_block_192 no_promotion > "$out/bias.log" 2>&1
echo "bias rc $?"; grep "^|" "$out/bias.log"
stamp bench
timeout 220 python3 scripts/bench_hopper_fp8.py --json "$out/fp8.json" --headdims 128 \
    --seqlens 1024 2048 4096 8192 16384 --reps 8 --iters 10 --block-k 384 \
    --variants key_block_192_serial key_block_192 no_promotion > "$out/fp8.log" 2>&1
echo "bench rc $?"; sed -n '/^| hdim/,$p' "$out/fp8.log"
timeout 150 python3 scripts/bench_hopper_fp8.py --json "$out/fp8_256.json" --headdims 256 \
    --seqlens 1024 4096 16384 --reps 8 --iters 10 --block-k 384 --variants serial > "$out/fp8_256.log" 2>&1
echo "bench256 rc $?"; sed -n '/^| hdim/,$p' "$out/fp8_256.log"
stamp clocks
timeout 120 python3 scripts/clock_probe.py --json "$out/clocks.json" --headdim 128 --block-k 384 --fp8-variants \
    key_block_192_serial key_block_192 --kernels fp8 fp8_key_block_192_serial fp8_key_block_192 > "$out/clocks.log" 2>&1
echo "clocks rc $?"; sed -n '/^| kernel/,$p' "$out/clocks.log"
stamp triton256
timeout 200 python3 scripts/bench.py --backends triton-fp8 hopper cudnn --headdims 256 --seqlens 4096 16384 \
    --directions fwd --causal no --out-dir "$out" --tag bench256 > "$out/bench256.log" 2>&1
echo "triton256 rc $?"; grep -E "^\|" "$out/bench256.log" | tail -8
stamp cudnn-drift
gpu_wheels "$out/wheels" "nvidia_cudnn_frontend-*.whl"
timeout 150 python3 scripts/bench_cudnn_fp8.py --json "$out/cudnn_drift.json" --headdims 128 256 --seqlens 4096 16384 \
    --causal no --cudnn-outputs bf16 --v-mean 1 --iters 5 --reps 3 > "$out/cudnn_drift.log" 2>&1
echo "cudnn drift rc $?"; grep -E "mean drift" "$out/cudnn_drift.log" | cut -c1-300
rm -rf "$out/wheels"
stamp done
gpu_archive promote2.tgz
