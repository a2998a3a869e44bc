#!/usr/bin/env bash
# 2026-12-04 (twenty-sixth session): the native bf16 forward and backward against cuDNN and FA2 at head dims 64 / 128
# after the 16-byte preprocess / postprocess (s26d), for the README's table (s26c is the same call before it). Carry
# build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s26e
stamp bench
timeout 330 python scripts/bench.py --backends hopper cudnn fa2 --headdims 64 128 --rounds 3 --iters 10 \
    --out-dir "$out" --tag native > "$out/bench_native.log" 2>&1
echo "bench rc $?"; grep -E "^\| (hdim|[0-9]+ )" "$out"/*native*.md | head -n 30
stamp done
