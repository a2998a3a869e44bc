#!/usr/bin/env bash
# 2026-12-01 eighth session, fourth call: the rest of issue 5's table that the third call's 300 s limit cut off
# (d128 16k causal, all of d256): scripts/bench.py end to end, kernel only, quantization only, beside our bf16
# forward and cuDNN bf16.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-fp8table256
stamp bench256
timeout 420 python3 scripts/bench.py --backends hopper-fp8 hopper cudnn --headdims 256 \
    --seqlens 512 1024 2048 4096 8192 16384 --directions fwd --out-dir "$out" --tag fp8table256 > "$out/bench256.log" 2>&1
echo "bench256 rc $?"
stamp bench128
timeout 100 python3 scripts/bench.py --backends hopper-fp8 hopper cudnn --headdims 128 --seqlens 16384 --causal yes \
    --directions fwd --out-dir "$out" --tag fp8table128c > "$out/bench128c.log" 2>&1
echo "bench128 rc $?"
stamp done
