#!/usr/bin/env bash
# Planned for a GPU call after the thirty-fifth session (carry build): patch_hf's right-padded masks as slots
# (fa3nn.slots, q / k / v as views) against the gather / scatter unpadding they took before, in the Hugging Face
# training step of scripts/hf_varlen_step_ab.py (8 layers, batch 8 x 2048 right-padded, lengths in [256, 2048]), with
# SDPA and the Triton varlen backward as before. Prediction: the slots save 3 gathers + 1 scatter per layer forward and
# their reverses in the backward (~8 passes over a 2048 x 8 x 2048-wide bf16 tensor, ~35 us each at ~3.5 TB/s):
# ~0.3 ms per layer, 2-5% of the step. Then the new GPU tests of FlashAttention-3's conventions (also in s35a).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s35b
stamp start
timeout 300 python scripts/hf_varlen_step_ab.py --rounds 7 --json "$out/hf_padding_slots.json" \
    > "$out/hf_padding_slots.log" 2>&1
echo "step ab rc $?"; sed -n '/^| attention/,$p' "$out/hf_padding_slots.log"; grep -E "Error" "$out/hf_padding_slots.log" | head -n 3
stamp ab
gpu_pytest fa3_compat_tests.log 120 tests/test_fa3_compat.py tests/test_hf.py
grep -E "^(FAILED|ERROR) " "$out/fa3_compat_tests.log" | head -n 10
stamp done
