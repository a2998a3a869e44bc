#!/usr/bin/env bash
# 2026-12-04 (thirtieth session, seventh call): sliding windows in the native backward (BwdConfig::kLocal: dense,
# default variants, one CTA per tile, empty tiles skipped). Every native backward test (the window cases new; every
# kernel's walk and mask helpers now take the window, folded away outside kLocal), the hopper API tests (auto trains
# windows on a Triton forward + native backward), then native x Triton backward on causal windows. Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s30g
stamp tests
gpu_pytest tests_bwd.log 300 tests/test_hopper_bwd.py tests/test_hopper.py tests/test_dispatch.py
gpu_log_summary "$out/tests_bwd.log"
stamp windows
timeout 200 python scripts/window_ab.py --directions bwd --flex-headdims --headdims 64 128 256 --seqlens 4096 16384 --lefts 1024 4096 \
    --rounds 3 --json "$out/window.json" > "$out/window.log" 2>&1
echo "window rc $?"; sed -n '/^| d /,$p' "$out/window.log"
stamp done
