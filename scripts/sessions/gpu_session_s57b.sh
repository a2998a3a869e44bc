#!/usr/bin/env bash
# s57b: the H200 record owed since s50 (NOTES Next 1; every run s53-s56 came on H100s), on main's kernels. Carry
# build/s56f.tar.xz (main's library: c28bd39 + the FP8 forward's few-pair deal, fc0ba6e; bcdb519 after it changed only
# the host-side balance model's code, identical on 20,304 shapes) and build/s52p.tar.xz (before the bf16 forward's
# few-pair deal, dbd9970).
# 1. bench.py's paper shapes (the record table, x cuDNN and FA2 in the same process).
# 2. The backward grid: Qwen 28 / 4 (row 5: per tile 1.09-1.16x auto on five H100 runs, 0.99 on the one H200 run),
#    the deal-rule rows 32-37, d64 one CTA per tile at 8k x 16-32 pairs (15, 52, 50, 53, 51: NOTES Next 3) and the d64
#    outermost rows 42-49, 17.
# 3. The forward's few-pair deal (bf16) against s52p's one-pair deal.
# 4. Every GPU test (what the call has left).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_unpack s52p
gpu_start /tmp/fa3nn-s57b s56f
gpu_bench_rows 130
stamp bench
gpu_table schedule_grid 130 scripts/bwd_schedule_grid.py --shapes 5 32 33 34 35 36 37 15 52 50 53 51 \
    42 43 44 45 46 47 48 49 17
stamp grid
gpu_table deals 70 scripts/fwd_deal_shapes.py --headdims 128 64 --rounds 3 \
    --compare before=build/s52p/libfa3nn_hopper.so
stamp deals
left=$((${TESTS_END:-570} - SECONDS))
[ "$left" -gt 60 ] && gpu_tests tests_all.log "$left" tests/
stamp "all tests"
