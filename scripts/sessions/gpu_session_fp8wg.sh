#!/usr/bin/env bash
# 2026-12-01 (third session): the FP8 consumer's warpgroup index broadcast from lane 0 (Q descriptors in uniform
# registers; d128 192-key loop 747 -> 714 instructions per warp and block). (1) the FP8 suite; (2) kernel-only
# timing against the previous build (build/base/libfa3nn_hopper.so, carried) at d128 and d256.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-fp8wg
stamp tests
timeout 100 python -m pytest -m gpu -n 8 -q -rfE -p no:cacheprovider tests/test_hopper_fp8.py > "$out/tests.log" 2>&1
echo "tests rc $?"; tail -n 2 "$out/tests.log"
stamp bench
timeout 120 python3 scripts/bench_hopper_fp8.py --json "$out/fp8.json" --headdims 128 256 --seqlens 4096 16384 \
    --reps 8 --iters 10 --block-k 384 --compare base=build/base/libfa3nn_hopper.so > "$out/fp8.log" 2>&1
echo "bench rc $?"; sed -n '/^| hdim/,$p' "$out/fp8.log"
stamp done
