#!/usr/bin/env bash
# 2026-12-03 (nineteenth session), last call: every GPU test on the final native build (the integer row max defaults
# of s19b-s19d), as s17a. Carry build.
set -u
source "$(dirname "$0")/gpu_env.sh"
gpu_setup /tmp/fa3nn-s19f
stamp tests
timeout 300 python -m pytest -m gpu -n 12 -q -rfE -p no:cacheprovider tests/ > "$out/tests_all.log" 2>&1
echo "tests rc $?"; tail -n 1 "$out/tests_all.log"
grep -E "^(FAILED|ERROR) " "$out/tests_all.log" | sed -E 's/^(FAILED|ERROR) //; s/ - .*//' > "$out/failed.txt"
if [ -s "$out/failed.txt" ]; then
    stamp "rerun $(wc -l < "$out/failed.txt") alone"
    timeout 120 python -m pytest -q -rfE -p no:cacheprovider $(head -n 40 "$out/failed.txt") > "$out/rerun.log" 2>&1
    echo "rerun rc $?"; grep -E "^(FAILED|ERROR) " "$out/rerun.log" | head -n 15; tail -n 1 "$out/rerun.log"
fi
stamp done
gpu_archive s19f.tar.gz
