#!/usr/bin/env bash
# 2026-12-02 (thirteenth session), after gpu_session_final13.sh: the backward at d128 and d64 with the dQ kernel on a
# second stream (triton / cuDNN / FA2; the forward is unchanged since final12 / final12b).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-final13b
stamp bench
timeout 240 python3 scripts/bench.py --backends triton cudnn fa2 --headdims 128 64 --directions bwd --out-dir "$out" \
    --tag final13_bwd --precompile 12 > "$out/bench_final13_bwd.log" 2>&1
echo "bench rc $?"; grep -E "^\| (128|64) " "$out/final13_bwd.md"
stamp done
gpu_archive final13b.tar.gz
