#!/usr/bin/env bash
# 2026-12-01 seventh session, first call: the FP8 d128 kernels with the row sums from the P V GEMM (8 rows of ones
# under Vt, m64n136k32): the FP8 GPU suites (native and Triton: the emulation and the Triton kernel now sum P8 at
# d128), the causal-deal test changed at the end of the sixth session, then kernel-only timing against variant
# key_block_192_fadd_row_sum (the previous default) and the sustained 16k rates. Carry build/libfa3nn_hopper.so.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-mmarowsum
stamp tests
gpu_pytest tests_fp8.log 150 tests/test_hopper_fp8.py tests/test_fp8_triton_gpu.py -v
grep -E "row_sums_are|fadd" "$out/tests_fp8.log" | head -8
gpu_pytest tests_deal.log 100 tests/test_hopper.py -k causal_deals
stamp bench
timeout 200 python3 scripts/bench_hopper_fp8.py --json "$out/fp8.json" --headdims 128 \
    --seqlens 1024 2048 4096 8192 16384 --reps 8 --iters 10 --block-k 384 \
    --variants key_block_192_fadd_row_sum key_block_128 > "$out/fp8.log" 2>&1
echo "bench rc $?"; sed -n '/^| hdim/,$p' "$out/fp8.log"
stamp clocks
timeout 100 python3 scripts/clock_probe.py --json "$out/clocks.json" --headdim 128 --fp8-variants \
    key_block_192_fadd_row_sum --kernels fp8 fp8_key_block_192_fadd_row_sum > "$out/clocks.log" 2>&1
echo "clocks rc $?"; sed -n '/^| kernel/,$p' "$out/clocks.log"
stamp done
gpu_archive mmarowsum.tgz
