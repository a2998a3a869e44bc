#!/usr/bin/env bash
# 2026-12-03 (eighteenth session). (1) The Triton FP8 GPU tests on the new default tiles (fp8_launch.FP8_FWD per
# (head dim, masked): d128 64x128/4w/3 non-causal, 128x128/8w/3 masked, from s17c). (2) The native FP8 d128 variant
# pv_parts (35: the default's fused turn with P V in two m64n64 head-dim parts in flight, each promoted as it lands,
# 0 spills offline): same function as the default (max abs diff, expected 0), then timed beside it
# (bench_hopper_fp8.py, 256-key descale tiles). (3) bench.py's Triton bf16 / Triton FP8 forward rows on the new
# tiles; (4) the d64 Triton FP8 tile table timed (never measured; fp8_triton_ab.py with the kernel against itself).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s18a
export FA3NN_TRITON_AUTOTUNE=0
stamp tests
gpu_pytest tests_fp8_triton.log 150 tests/test_fp8_triton_gpu.py
grep -E "^(FAILED|ERROR)" "$out/tests_fp8_triton.log" | head -n 10
stamp exact
timeout 90 python scripts/fp8_variant_exactness.py --variant pv_parts --headdims 128 --seqlens 2048 16384 \
    --block-k 256 > "$out/exact.log" 2>&1
echo "exact rc $?"; tail -n 6 "$out/exact.log"
stamp native
gpu_fp8_bench pv_parts 150 --headdims 128 --seqlens 2048 4096 8192 16384 --block-k 256 --variants pv_parts --reps 5
stamp bench
timeout 120 python scripts/bench.py --backends triton triton-fp8 --headdims 128 --seqlens 2048 16384 \
    --directions fwd --iters 5 --reps 3 --rotate 2 --out-dir "$out" --tag fp8triton > "$out/bench.log" 2>&1
echo "bench rc $?"; grep -E "^\| 128" "$out/fp8triton.md" | cut -d'|' -f2-5,8-9,15
stamp d64
timeout 100 python scripts/fp8_triton_ab.py --before fa3nn/backends/triton/fp8_kernels.py --headdims 64 \
    --seqlens 2048 16384 --json "$out/fp8_triton_ab64.json" > "$out/fp8_triton_ab64.log" 2>&1
echo "ab64 rc $?"; sed -n '/^| d /,$p' "$out/fp8_triton_ab64.log" | cut -d'|' -f2-7
stamp done
gpu_archive s18a.tar.gz
