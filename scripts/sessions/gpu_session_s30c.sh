#!/usr/bin/env bash
# 2026-12-04 (thirtieth session, third call): the d256 native backward with bulk dQ staged in the Q / dO ring stage
# it has just read (BwdConfig::kDQInRing; s30b: the red.global dQ took half the backward). Every d256 native backward
# test (now also the bulk_dq variant's, bitwise dK / dV against red_dq), bulk x red dQ whole backward, then bench.py's
# d256 backward rows against cuDNN, FA2 and the Triton backward. Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s30c
stamp tests
gpu_pytest tests_d256.log 200 tests/test_hopper_bwd.py -k "256"
gpu_log_summary "$out/tests_d256.log"
stamp variants
timeout 120 python scripts/bwd_build_ab.py --headdims 256 --seqlens 512 2048 8192 --variants bulk_dq red_dq \
    --rounds 3 --json "$out/variants.json" > "$out/variants.log" 2>&1
echo "variants rc $?"; sed -n '/^| d /,$p' "$out/variants.log"
stamp bench
timeout 200 python3 scripts/bench.py --backends hopper triton cudnn fa2 --headdims 256 --directions bwd \
    --out-dir "$out" --tag bench256 --precompile 12 > "$out/bench_bench256.log" 2>&1
echo "bench rc $?"; grep -E "^\| [0-9]+ " "$out/bench256.md"
stamp done
