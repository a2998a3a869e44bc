#!/usr/bin/env bash
# Prepared 2026-12-01 (second session), not yet run: the 192-key FP8 d128 kernel with a quarter of its exp2s as the
# FP32 polynomial (variant key_block_192_poly_exp2), against the default (192 keys, all MUFU) and the 128-key kernel
# on the same inputs (block_k 384 serves all three). Why: ncu of the 192-key kernel (NOTES "ncu of the 192-key FP8
# d128 kernel") puts 15% of its stall samples on waits for MUFU results now that the skeleton no longer limits; the
# same polynomial measured within noise at 128 keys, where it did. (1) the FP8 suite (the variant's exact-score
# test); (2) kernel-only timing. Run 2026-12-01 (third session) with the Triton GPU suites added.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-poly192
stamp tests
timeout 120 python -m pytest -m gpu -n 8 -q -rfE -p no:cacheprovider tests/test_hopper_fp8.py > "$out/tests.log" 2>&1
echo "tests rc $?"; tail -n 3 "$out/tests.log"
# The review commit's host changes (the Triton launcher's argument dict, the quantize parts' arguments) on the GPU.
stamp triton-tests
timeout 150 python -m pytest -m gpu -n 8 -q -rfE -p no:cacheprovider tests/test_triton_gpu.py \
    tests/test_fp8_triton_gpu.py > "$out/triton_tests.log" 2>&1
echo "triton tests rc $?"; tail -n 3 "$out/triton_tests.log"
stamp fp8
timeout 200 python3 scripts/bench_hopper_fp8.py --json "$out/fp8.json" --headdims 128 \
    --seqlens 2048 4096 8192 16384 --reps 8 --iters 10 --block-k 384 \
    --variants key_block_192_poly_exp2 key_block_128 > "$out/fp8.log" 2>&1
echo "fp8 rc $?"; sed -n '/^| hdim/,$p' "$out/fp8.log"
stamp done
gpu_archive poly192.tgz
