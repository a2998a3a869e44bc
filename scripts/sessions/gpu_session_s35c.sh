#!/usr/bin/env bash
# Planned for a GPU call after the thirty-fifth session (carry build): DeepSeek-style multi-head latent attention
# shapes (q / k head dim 192, v 128), which patch_hf now sends to the Triton backend (the native kernels need equal
# head dims), against cuDNN SDPA and FA2 where they run them, forward and backward, causal, 2k / 8k. Decides whether a
# native 192 / 128 kernel is worth building (FlashAttention-3 has one). Prediction: Triton at 0.7-0.8x cuDNN (its d128
# ratios) if cuDNN runs unequal head dims at all; FA2 cannot (equal head dims only).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s35c
stamp start
timeout 400 python scripts/bench.py --backends triton cudnn fa2 --headdims 192 --headdim-v 128 --seqlens 2048 8192 \
    --causal yes --out-dir "$out" --tag mla-192-128 > "$out/mla.log" 2>&1
echo "mla rc $?"; sed -n '/^| hdim/,$p' "$out/mla.log"; grep -E "Error" "$out/mla.log" | head -n 3
stamp done
