#!/usr/bin/env bash
# 2026-12-04 (twenty-seventh session, third call): where a tile's time goes in the persistent native backward
# (s27a/b: persistent +0-7% non-causal at 512-4k against the +27% bound of s26f's GQA grouping at d128 512, so ~7 us
# per tile is left that chaining tiles does not remove). scripts/bwd_trace.py through the measurement build
# (FA3NN_BWD_TRACE, carried in build/trace/) at d128 / d64 x 512 / 2048 / 16384 non-causal. Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s27c
stamp trace
timeout 240 python scripts/bwd_trace.py --trace-lib build/trace/libfa3nn_hopper.so --json "$out/trace.json" \
    > "$out/trace.log" 2>&1
echo "trace rc $?"; sed -n '/^| d /,$p' "$out/trace.log"; grep -iE "error|Traceback" "$out/trace.log" | head -5
stamp done
