#!/usr/bin/env bash
# 2026-12-04 (thirty-first session, fifth call): sliding windows in the varlen backward (BwdConfig kLocal + kVarlen,
# branch bwd-varlen-window): the varlen window probe first (one process, 30 s cap: a hang costs 30 s), then every GPU
# test with 8 workers (the auto-path varlen test now with windows too), failures rerun alone; then the varlen window
# backward against the Triton one on packed lengths (scripts/window_ab.py has no varlen; bwd_varlen_ab.py's shapes
# with a window). Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s31e
stamp start
timeout 60 python -m pytest -q -x -p no:cacheprovider tests/test_hopper.py -k "test_auto_trains_varlen_on_hopper and w100" \
    > "$out/probe.log" 2>&1
echo "probe rc $?"; tail -n 2 "$out/probe.log"
stamp probe
TEST_WORKERS=8 RERUN_MAX=150 gpu_all_tests 240 70
timeout 150 python scripts/bwd_varlen_ab.py --headdims 64 128 256 --varlen-cases 2048 mixed --window 1024 \
    --json "$out/varlen_window_ab.json" > "$out/varlen_window_ab.log" 2>&1
echo "varlen ab rc $?"; sed -n '/^| d | lengths/,$p' "$out/varlen_window_ab.log"
grep -E "Error" "$out/varlen_window_ab.log" | head -n 3
stamp ab
