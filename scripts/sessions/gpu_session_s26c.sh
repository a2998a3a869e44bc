#!/usr/bin/env bash
# 2026-12-04 (twenty-sixth session): every GPU test on main's native library as built this session (no kernel
# change since the twenty-fifth session's last), and a fresh table of the native bf16 forward and backward against
# cuDNN and FA2 at head dims 64 / 128 (the README's backward ratios date from 2026-11-30). Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s26c
stamp tests
gpu_all_tests 240 60
stamp bench
timeout 280 python scripts/bench.py --backends hopper cudnn fa2 --headdims 64 128 --rounds 3 --iters 10 \
    --out-dir "$out" --tag native > "$out/bench_native.log" 2>&1
echo "bench rc $?"; grep -E "^\| (hdim|[0-9]+ )" "$out"/*native*.md | head -n 30
stamp done
