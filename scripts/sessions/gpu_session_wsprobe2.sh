#!/usr/bin/env bash
# 2026-12-02 (fourteenth session), after gpu_session_wsprobe.sh's probe printed nothing in 150 s (a hang): the probe
# again, each variant in its own process under a 50 s timeout, the plain variants first and a variant whose every
# loop load (lse / delta too) goes through a descriptor.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-wsprobe2
stamp probe
timeout 330 python3 scripts/triton_ws_probe.py --seqlens 2048 8192 16384 --timeout 50 --json "$out/ws_probe.json" \
    > "$out/ws_probe.log" 2>&1
echo "probe rc $?"; grep -E "^\|" "$out/ws_probe.log"
stamp done
gpu_archive wsprobe2.tar.gz
