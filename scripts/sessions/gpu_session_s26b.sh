#!/usr/bin/env bash
# 2026-12-04 (twenty-sixth session): the quantization pass's Hadamard rotation as a 16-bit tensor-core GEMM
# (rotate_precision "mma16": rows in their own bf16/fp16 times diag(s) H as +-1, fp32 sums, then 1/sqrt(d); offline
# 6-6.5 warp instructions per rotated row against fwht's 43.5-85.5 at d128, 0 spills). The FP8 quantization and
# forward GPU tests on it as the default, its timing and distance to the fp64 rotation beside fwht and no
# rotation, and issue 5's d128 rows end to end (bench.py). Carry build and .whl.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s26b
stamp tests
gpu_pytest tests_quant.log 300 tests/test_fp8_triton_gpu.py tests/test_fp8_api.py
grep -E "^(FAILED|ERROR)|assert" "$out/tests_quant.log" | head -n 12
stamp quant
timeout 200 python scripts/bench_fp8_quant.py --json "$out/quant.json" --headdims 128 64 256 --seqlens 16384 4096 \
    --precisions fwht mma16 --reps 7 > "$out/quant.log" 2>&1
echo "quant rc $?"; sed -n '/^| d /,$p' "$out/quant.log"
stamp record
gpu_fp8_record 300 --headdims 128 --seqlens 2048 4096 8192 16384 --rounds 5
stamp done
