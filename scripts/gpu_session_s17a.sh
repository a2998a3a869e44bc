#!/usr/bin/env bash
# 2026-12-03 (seventeenth session), first call with the native library: every GPU test (pytest -m gpu) on e92ef1f's
# tree with a fresh build/libfa3nn_hopper.so (carried), the first whole-suite run since the eleventh session (the
# Triton suite alone ran after each Triton change since). Failures are rerun alone, one worker (12 workers sharing
# the GPU ran the fp32 reference of d256 8k out of memory before).
set -u
source "$(dirname "$0")/gpu_env.sh"
gpu_setup /tmp/fa3nn-s17a
stamp tests
timeout 300 python -m pytest -m gpu -n 12 -q -rfE -p no:cacheprovider tests/ > "$out/tests_all.log" 2>&1
echo "tests rc $?"; tail -n 1 "$out/tests_all.log"
grep -E "^(FAILED|ERROR) " "$out/tests_all.log" | sed -E 's/^(FAILED|ERROR) //; s/ - .*//' > "$out/failed.txt"
if [ -s "$out/failed.txt" ]; then
    stamp "rerun $(wc -l < "$out/failed.txt") alone"
    timeout 200 python -m pytest -q -rfE -p no:cacheprovider $(head -n 40 "$out/failed.txt") > "$out/rerun.log" 2>&1
    echo "rerun rc $?"; grep -E "^(FAILED|ERROR) " "$out/rerun.log" | head -n 15; tail -n 1 "$out/rerun.log"
fi
stamp done
gpu_archive s17a.tar.gz
