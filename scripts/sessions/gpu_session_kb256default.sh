#!/usr/bin/env bash
# 2026-12-02 eleventh session: the fused 256-key kernel as the d128 FP8 default (PerTileScaling's default K/V tile
# 256 at d128; 192-key and 128-key kernels where the tiles need them). Every FP8 GPU test; the short-key rule
# (key_blocks.SHORT_KEYS = 512) checked with kernel-only timing of the default against the 192- and 128-key fused
# kernels at 512-16k (K/V tiles of 768 rows serve all three); issue 5's table (scripts/bench.py: end to end, kernel
# and quantization beside our bf16 forward and cuDNN bf16, d128); cuDNN's FP8 forward beside our default at d128 and
# d256. Carry build (libfa3nn_hopper.so) and .whl (cudnn-frontend).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-kb256default
stamp tests
gpu_pytest tests_fp8.log 200 tests/ -k "fp8 or FP8"
grep -E "^(FAILED|ERROR)" "$out/tests_fp8.log" | head -12
stamp short
timeout 200 python3 scripts/bench_hopper_fp8.py --json "$out/fp8_d128.json" --headdims 128 \
    --seqlens 512 1024 2048 4096 8192 16384 --reps 8 --iters 10 --block-k 768 \
    --variants key_block_192_fused_turn_poly4 fused_turn > "$out/fp8_d128.log" 2>&1
echo "bench rc $?"; sed -n '/^| hdim/,$p' "$out/fp8_d128.log"
stamp table
timeout 300 python3 scripts/bench.py --backends hopper-fp8 hopper cudnn --headdims 128 \
    --seqlens 512 1024 2048 4096 8192 16384 --directions fwd --out-dir "$out" --tag fp8table > "$out/bench.log" 2>&1
echo "bench.py rc $?"; grep -E "^\|" "$out/bench.log" | tail -n 16
stamp cudnn
gpu_wheels "$out/wheels" "nvidia_cudnn_frontend-*.whl"
timeout 150 python3 scripts/bench_cudnn_fp8.py --json "$out/cudnn_fp8.json" --headdims 128 256 \
    --seqlens 2048 4096 8192 16384 --cudnn-outputs e4m3 --iters 10 --reps 5 > "$out/cudnn_fp8.log" 2>&1
echo "cudnn rc $?"; sed -n '/^| hdim/,$p' "$out/cudnn_fp8.log"
rm -rf "$out/wheels"
stamp done
gpu_archive kb256default.tgz
