#!/usr/bin/env bash
# 2026-12-04 (twenty-ninth session, second call): the varlen backward's schedule. s29a measured the auto choice
# (persistent, dealt boustrophedon, up to 4096 causal rows) at 309 TFLOP/s on mixed causal lengths, 0.99x Triton's:
# time one CTA per tile and persistent in both grid orders, mixed [256, 4096] and short [32, 1024] lengths. Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s29b
stamp ab
timeout 420 python scripts/bwd_varlen_ab.py --rounds 5 --varlen-cases mixed short 2048 \
    --schedules per_tile persistent --json "$out/varlen_modes.json" > "$out/varlen_modes.log" 2>&1
echo "ab rc $?"; sed -n '/^| d /,$p' "$out/varlen_modes.log"
stamp done
