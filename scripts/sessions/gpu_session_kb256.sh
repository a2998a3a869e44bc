#!/usr/bin/env bash
# 2026-12-02 eleventh session: the FP8 d128 fused turn on 256-key blocks (variants key_block_256_fused_turn, _poly4),
# cuDNN's FP8 tile per warpgroup (64 x 256, ncu of its kernel: fp8peer-h200-20261202-0747). Tests (exact scores
# against the emulation with block_n 256, mean of V over 8192 keys), the clock64 trace of the default and both
# variants at 16k, kernel-only timing against the default (192-key) with K/V tiles of 768 rows (serves both), and
# the 256-key poly4 kernel against cuDNN's FP8 forward (per-tensor scales). Carry build (libfa3nn_hopper.so,
# fp8_trace) and .whl (cudnn-frontend).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-kb256
gpu_wheels /tmp/site "nvidia_cudnn_frontend-*.whl"
stamp tests
gpu_pytest tests.log 150 tests/test_hopper_fp8.py -k "key_block_256 or mean_of_v"
grep -E "^(FAILED|ERROR)" "$out/tests.log" | head -n 12
stamp trace
for v in 0 30 31; do
    timeout 60 build/fp8_trace 16384 0 $v > "$out/trace_$v.log" 2>&1; grep -E "wg [01]:|TFLOP" "$out/trace_$v.log"
done
stamp bench
timeout 260 python3 scripts/bench_hopper_fp8.py --json "$out/fp8_d128.json" --headdims 128 \
    --seqlens 1024 2048 4096 8192 16384 --reps 8 --iters 10 --block-k 768 \
    --variants key_block_192_fused_turn_poly4 key_block_256_fused_turn key_block_256_fused_turn_poly4 \
    > "$out/fp8_d128.log" 2>&1
echo "bench rc $?"; sed -n '/^| hdim/,$p' "$out/fp8_d128.log"
stamp cudnn
timeout 200 python3 scripts/bench_cudnn_fp8.py --json "$out/cudnn_fp8.json" --headdims 128 \
    --seqlens 4096 8192 16384 --cudnn-outputs e4m3 --variant key_block_256_fused_turn_poly4 \
    > "$out/cudnn_fp8.log" 2>&1
echo "cudnn rc $?"; sed -n '/^| hdim/,$p' "$out/cudnn_fp8.log"
stamp done
