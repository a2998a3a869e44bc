#!/usr/bin/env bash
# 2026-12-03 (eighteenth session), third call: the quantization pass reading its own-scale tiles twice in parts
# (quantize.RELOAD_ROWS, default 64: d128 Q / K+V launches at 96 registers and 4 warps instead of 127 / 197 at 8,
# so several programs per SM instead of one K/V program; the cost is a second read, mostly from L2, and the FWHT run
# twice). (1) Every FP8 GPU test (the pass feeds all of them). (2) scripts/bench_quant_ab.py against the module
# before the change (build/quant_before/quantize_before.py, carried), bitwise check and timing, with RELOAD_ROWS 0 /
# 32 / 128 as variants. Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s18c
stamp tests
gpu_pytest tests_fp8.log 240 tests/ -k "fp8 or FP8"
grep -E "^(FAILED|ERROR)" "$out/tests_fp8.log" | head -n 10
stamp ab
timeout 200 python scripts/bench_quant_ab.py --before build/quant_before/quantize_before.py --headdims 128 256 \
    --seqlens 2048 16384 --reload-rows 0 32 128 --json "$out/quant_ab.json" > "$out/quant_ab.log" 2>&1
echo "ab rc $?"; tail -n 7 "$out/quant_ab.log"
stamp done
gpu_archive s18c.tar.gz
