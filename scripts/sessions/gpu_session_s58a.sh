#!/usr/bin/env bash
# s58a: one call that does what the card it lands on is owed (naming nvidia-h200 gets an H100 or an H200).
# Carry build/s57r.tar.xz (main's library: 81015ec's d64 per-tile rule; kernels' SASS identical to s56f's),
# build/s56m.tar.xz (s56's lse-ahead branch f9692bd built with --define FA3NN_BWD_LSE_AHEAD=3) and build/s52p.tar.xz
# (the bf16 forward before its few-pair deal).
# H200: the record owed since s50 (s57b's stages on main's library): bench.py paper shapes, the backward grid (Qwen
#   28 / 4 row 5, deal rows 32-37, d64 per-tile rows 15 52 50 53 51 as auto now, d64 outermost rows 42-49 17), the
#   forward's few-pair deal against s52p, then every GPU test in what is left.
# H100: s57c (auto's d64 per-tile rule run as auto: rows 52 / 50 / 53 predicted auto = tile_outer, 1.04-1.06x
#   tile_inner; 15 and 51 unchanged; then the backward's GPU tests), then the second run of d64 lse-ahead 3 against
#   main (s57a: +0.4-3.0% in six of six d64 rows from 2k; predicted again +0.5-3%, else it was noise). The backward
#   tests run with tests/test_row_spans.py (cu_seqlens leaving packed rows out, 1a8cf30: its GPU cases) and, since
#   s59, tests/test_fp8_api.py (DelayedScaling under checkpoint + compile on the GPU, cf5bb5d).
# S58_SHORT=1 (a call with little device time left): the H200 does the bench and every GPU test only (TESTS_END
# bounds them; S58_TESTS names the test files instead of tests/), the H100 the grid and the tests only.
set -u
source "$(dirname "$0")/../gpu_env.sh"
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
    gpu_unpack s52p
    gpu_start /tmp/fa3nn-s58a s57r
    gpu_bench_rows 130
    stamp bench
    if [ -z "${S58_SHORT:-}" ]; then
        gpu_table schedule_grid 130 scripts/bwd_schedule_grid.py --shapes 5 32 33 34 35 36 37 15 52 50 53 51 \
            42 43 44 45 46 47 48 49 17
        stamp grid
        gpu_table deals 70 scripts/fwd_deal_shapes.py --headdims 128 64 --rounds 3 \
            --compare before=build/s52p/libfa3nn_hopper.so
        stamp deals
    fi
    left=$((${TESTS_END:-570} - SECONDS))
    [ "$left" -gt 60 ] && gpu_tests tests_all.log "$left" ${S58_TESTS:-tests/}
    stamp "all tests"
else
    gpu_unpack s56m
    gpu_start /tmp/fa3nn-s58a s57r
    gpu_table schedule_grid 60 scripts/bwd_schedule_grid.py --shapes 52 50 53 15 51 --rounds 3
    stamp grid
    gpu_tests tests_bwd.log 150 tests/test_hopper_bwd.py tests/test_row_spans.py tests/test_fp8_api.py
    stamp "bwd tests"
    [ -n "${S58_SHORT:-}" ] && exit 0
    timeout 150 python3 scripts/bwd_build_ab.py --headdims 64 --seqlens 512 2048 8192 16384 --rounds 7 \
        --compare ahead3=build/s56m/libfa3nn_hopper.so --json "$out/lse_ab.json" > "$out/lse_ab.log" 2>&1
    echo "ab rc $?"; grep -E "^\|" "$out/lse_ab.log"; tail -n 3 "$out/lse_ab.log"
    stamp ab
fi
