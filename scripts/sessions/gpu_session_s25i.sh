#!/usr/bin/env bash
# 2026-12-04 (twenty-fifth session): issue 5's 16k non-causal rows on the TMA-store default, bench.py --rounds 7
# (FP8 kernel and end to end, our bf16 forward), as the s24a / s24d table. Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s25i
stamp bench
timeout 240 python scripts/bench.py --backends hopper-fp8 hopper --directions fwd --iters 5 --rotate 2 --reps 5 \
    --rounds 7 --out-dir "$out" --tag fp8rounds --headdims 128 256 --seqlens 16384 --causal no > "$out/bench.log" 2>&1
echo "bench rc $?"; grep -E "^\| [0-9]+ " "$out"/fp8rounds.md | head -8
stamp done
