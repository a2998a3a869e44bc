#!/usr/bin/env bash
# 2026-12-02 (fourteenth session): (1) scripts/triton_ws_probe.py, a minimal dK/dV loop with and without Triton's
# automatic warp specialization (d128, 2k / 8k / 16k); (2) the library's backward kernel by kernel at the same shapes
# (scripts/bwd_breakdown.py: its dK/dV kernel's time is the probe's comparison); (3) the d256 backward table
# (triton / cuDNN / FA2) with the dV kernel on 64x128/8w/2 non-causal past 1k.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-wsprobe
stamp probe
timeout 330 python3 scripts/triton_ws_probe.py --seqlens 2048 8192 16384 --timeout 50 --json "$out/ws_probe.json" \
    > "$out/ws_probe.log" 2>&1
echo "probe rc $?"; grep -E "^\|" "$out/ws_probe.log"
stamp breakdown
timeout 120 python3 scripts/bwd_breakdown.py --headdims 128 --seqlens 2048 8192 16384 --backends triton \
    --json "$out/bwd_breakdown.json" > "$out/bwd_breakdown.log" 2>&1
echo "breakdown rc $?"; tail -n 12 "$out/bwd_breakdown.log"
stamp bench256
gpu_bench ws14_256 200 --headdims 256 --directions bwd
stamp done
gpu_archive wsprobe.tar.gz
