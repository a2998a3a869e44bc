#!/usr/bin/env bash
# 2026-12-04 (thirty-first session, second call): sliding windows in the native forward (FwdConfig::kLocal, branch
# fwd-window). The A/B first (native window forward and backward x the Triton kernels and FlexAttention at d128,
# causal windows (1024, 0) / (4096, 0), rows written as they finish), then every GPU test (the new window forward
# cases: dense 288, varlen 18, the auto-path training test now native both ways), failures rerun alone. Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s31b
stamp start
timeout 270 python scripts/window_ab.py --headdims 64 128 256 --flex-headdims 128 --rounds 5 \
    --json "$out/window_ab.json" > "$out/window_ab.log" 2>&1
echo "ab rc $?"; grep -E "^\| (fwd|bwd)" "$out/window_ab.log"; grep -E "Error|error" "$out/window_ab.log" | head -n 3
stamp ab
gpu_all_tests 250 50
stamp done
