#!/usr/bin/env bash
# 2026-12-01 (second session), first call: the two Triton FP8 changes of 92a86f0 that had not run on a GPU (the fused
# quantization pass loads V's rows in Vt's 16-key-group order and stores contiguous columns; the Triton FP8 forward
# loads K's rows permuted and Vt contiguous). (1) the FP8 GPU suites; (2) scripts/bench.py FP8 rows end to end,
# kernel only and quantization only (the pass measured 0.58-0.66 ms at 05:00 UTC against 0.13 ms on 2026-11-30),
# the Triton FP8 forward beside them, our bf16 forward and cuDNN, head dims 128 and 256.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-quantcheck
stamp tests
timeout 200 python -m pytest -m gpu -n 8 -v -rfE -p no:cacheprovider tests/test_hopper_fp8.py \
    tests/test_fp8_triton_gpu.py tests/test_fp8_api.py > "$out/tests.log" 2>&1
echo "tests rc $?"; gpu_log_summary "$out/tests.log"
stamp bench
timeout 330 python scripts/bench.py --backends hopper-fp8 triton-fp8 hopper cudnn --directions fwd \
    --headdims 128 256 --seqlens 2048 8192 16384 --causal both --reps 5 --out-dir "$out" --tag fp8-e2e \
    > "$out/fp8_e2e.log" 2>&1
echo "bench rc $?"; sed -n '/^| hdim/,$p' "$out/fp8-e2e.md" 2>/dev/null | cut -c1-400
stamp done
gpu_archive quantcheck.tgz
