#!/usr/bin/env bash
# 2026-12-01 sixth session, last call: every GPU test on the final code (the quantization pass changed after the
# 1013-test run of final6), then the quantization A/B again with the corrected timing (bench.py's time_ms; the
# first A/B timed the host) and a 16-warp variant. Carry build/libfa3nn_hopper.so and build/quant_before.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-final7
stamp tests
gpu_pytest tests_all.log 200 tests/
stamp ab
timeout 150 python3 scripts/bench_quant_ab.py --before build/quant_before/quantize_before.py --json "$out/quant_ab.json" \
    --headdims 128 256 --seqlens 2048 16384 --warps 16 > "$out/quant_ab.log" 2>&1
echo "ab rc $?"; tail -n 8 "$out/quant_ab.log"
gpu_archive final7.tgz
stamp done
