#!/usr/bin/env bash
# 2026-12-03 (twentieth session), seventh call: the bf16 forward with the FP8 kernel's K/V releases by every
# consumer warp (FwdBarriers now serves both; the FP8 kernels' SASS is unchanged by the move, checked offline, so
# s20d's FP8 tests stand). (1) The bf16 forward's GPU tests (tests/test_hopper.py). (2) Kernel-only A/B of the bf16
# default against the build before (build/before/libfa3nn_hopper.so: thread 0 releasing for its warpgroup), every
# head dim, 4k and 16k, 5 balanced rounds beside cuDNN. Carry build. (No gain measured: the bf16 change was
# reverted after this call, benchmarks/NOTES.md s20g.)
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s20g
export FA3NN_TRITON_AUTOTUNE=0
stamp tests
gpu_pytest tests_hopper.log 250 tests/test_hopper.py
grep -E "^(FAILED|ERROR)" "$out/tests_hopper.log" | head -n 10
stamp ab
timeout 200 python scripts/bench_hopper.py --json "$out/bf16_ab.json" --headdims 64 128 256 \
    --seqlens 4096 16384 --ablation-seqlens --reps 5 --compare before=build/before/libfa3nn_hopper.so \
    > "$out/bf16_ab.log" 2>&1
echo "ab rc $?"; sed -n '/^| hdim/,$p' "$out/bf16_ab.log"
stamp done
gpu_archive s20g.tar.gz
