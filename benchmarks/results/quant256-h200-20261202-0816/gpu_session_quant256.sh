#!/usr/bin/env bash
# 2026-12-02 eleventh session: the quantization pass with 256-row K/V tiles in two 128-row parts (8 warps; it ran
# with 16 at 0.171-0.176 ms in kb256default-h200-20261202-0812): every FP8 GPU test, then issue 5's d128 table
# (scripts/bench.py: end to end, kernel and quantization beside our bf16 forward and cuDNN bf16).
# Carry build (libfa3nn_hopper.so).
set -u
source "$(dirname "$0")/gpu_env.sh"
gpu_setup /tmp/fa3nn-quant256
stamp tests
gpu_pytest tests_fp8.log 200 tests/ -k "fp8 or FP8"
grep -E "^(FAILED|ERROR)" "$out/tests_fp8.log" | head -12
stamp table
timeout 300 python3 scripts/bench.py --backends hopper-fp8 hopper cudnn --headdims 128 \
    --seqlens 512 1024 2048 4096 8192 16384 --directions fwd --out-dir "$out" --tag fp8table > "$out/bench.log" 2>&1
echo "bench.py rc $?"; grep -E "^\|" "$out/bench.log" | tail -n 14 | cut -d'|' -f1-12,18-21
stamp done
