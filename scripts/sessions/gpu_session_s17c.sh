#!/usr/bin/env bash
# 2026-12-03 (seventeenth session): the Triton FP8 forward with its Vᵀ columns declared 16-aligned (offline: the
# unmasked Vᵀ load was one LDG.U8 per byte outside the pipeline, now cp.async of 16-byte vectors; d128 128x64/8w/3
# 646 -> 522 warp instructions per 1024 scores, 128x128/8w/3 and the d256 tiles spill less or not at all).
# (1) the Triton FP8 GPU tests; (2) scripts/fp8_triton_ab.py, the kernel before the change (ab_before_fp8_kernels.py,
# `git show HEAD:fa3nn/backends/triton/fp8_kernels.py`, untracked, carried in the tree) against after, every tile of
# the d128 table and four d256 tiles (two new 8-warp 64-row ones compile without spills), 2k and 16k, causal and
# not. (3) bench.py's Triton FP8 rows beside the bf16 Triton forward.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s17c
export FA3NN_TRITON_AUTOTUNE=0
stamp tests
gpu_pytest tests_fp8_triton.log 150 tests/test_fp8_triton_gpu.py
grep -E "^(FAILED|ERROR)" "$out/tests_fp8_triton.log" | head -n 10
stamp ab
timeout 150 python scripts/fp8_triton_ab.py --before ab_before_fp8_kernels.py --headdims 128 \
    --seqlens 2048 16384 --json "$out/fp8_triton_ab128.json" > "$out/fp8_triton_ab128.log" 2>&1
echo "ab128 rc $?"; sed -n '/^| d /,$p' "$out/fp8_triton_ab128.log"
grep -hE "Error|error" "$out"/fp8_triton_ab*.log | head -5
stamp bench
# (3) the Triton FP8 rows beside our bf16 Triton forward, one bench.py run (kernel and end to end)
timeout 140 python scripts/bench.py --backends triton triton-fp8 --headdims 128 256 --seqlens 2048 16384 \
    --directions fwd --iters 5 --reps 3 --rotate 2 --out-dir "$out" --tag fp8triton > "$out/bench.log" 2>&1
echo "bench rc $?"; grep -E "^\| (triton|backend)" "$out/fp8triton.md" | head -20
timeout 140 python scripts/fp8_triton_ab.py --before ab_before_fp8_kernels.py --headdims 256 \
    --seqlens 2048 16384 --tiles 128x64x8x2 128x32x8x3 64x64x8x2 64x32x8x3 \
    --json "$out/fp8_triton_ab256.json" > "$out/fp8_triton_ab256.log" 2>&1
echo "ab256 rc $?"; sed -n '/^| d /,$p' "$out/fp8_triton_ab256.log"
stamp done
gpu_archive s17c.tar.gz
