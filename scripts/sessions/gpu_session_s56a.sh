#!/usr/bin/env bash
# s56a: what main owes a GPU since the fifty-fifth session, in the order it matters, on whichever card comes (an H200
# discharges NOTES Next 1, the record owed since s50). Carry build/s56f.tar.xz, build/s55p.tar.xz, build/s52p.tar.xz.
#   build/s56f: branch wip/fp8-few-pair-deal = main's kernels (c28bd39) + the few-pair causal deal for dense FP8 calls
#   build/s55p: main's library (c28bd39): `python -m fa3nn.backends.hopper_build --out build/s55p/libfa3nn_hopper.so`
#   build/s52p: main's kernels before the forward's few-pair deal (dbd9970)
# 1. The backward's tests on s56f (the d64 key-blocks-outermost bound at 48 pairs, bb581b9, has had no GPU test) and
#    the FP8 forward's deal tests (s56f's change).
# 2. bench.py's paper shapes (the record table) on s56f (the paper's shapes keep main's deals in both builds).
# 3. The FP8 forward's deals at few pairs, s56f against main's deal (s55p): simulated one pair 1.25-1.68 x one section
#    1.01-1.03 at one 4k x 8-24 heads and one 2k x 16, so s56f predicted 1.2-1.5x main there, 1.00 at one 2k x 32
#    and the paper's 4 x 4k / 8 x 2k (one pair in both builds).
# 4. The backward grid's d64 causal rows past 16 pairs as auto (s55d's rows 42-51 and 17: predicted ahead of
#    pers_inner to 32-48 pairs at 4k, behind at 128+), Qwen 28 / 4 (5) and the deal-rule rows 32-37.
# 5. The forward's few-pair deal (bf16) against s52p's one-pair deal (s55b's rows, on this card).
# 6. Every other GPU test (TESTS_LIMIT seconds: what the call has left).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_unpack s55p s52p
gpu_start /tmp/fa3nn-s56a s56f
gpu_tests tests_bwd.log 200 tests/test_hopper_bwd.py tests/test_sm_margin.py tests/test_hopper_fp8.py -k \
    "not test_hopper_fp8 or deal"
stamp "bwd + FP8 deal tests"
gpu_bench_rows 120
stamp bench
timeout 80 python3 scripts/fwd_deal_shapes.py --fp8 --rounds 3 --compare main=build/s55p/libfa3nn_hopper.so \
    --json "$out/deals_fp8.json" > "$out/deals_fp8.log" 2>&1
echo "deals fp8 rc $?"; grep -E "^\|" "$out/deals_fp8.log"; tail -n 3 "$out/deals_fp8.log"
stamp "deals fp8"
gpu_table schedule_grid 150 scripts/bwd_schedule_grid.py --shapes 42 43 44 45 46 47 48 49 50 51 17 5 32 33 34 35 36 37
stamp grid
timeout 80 python3 scripts/fwd_deal_shapes.py --headdims 128 64 --rounds 3 \
    --compare before=build/s52p/libfa3nn_hopper.so --json "$out/deals.json" > "$out/deals.log" 2>&1
echo "deals rc $?"; grep -E "^\|" "$out/deals.log"; tail -n 3 "$out/deals.log"
stamp deals
left=$((${TESTS_END:-570} - SECONDS))
[ "$left" -gt 60 ] && gpu_tests tests_rest.log "$left" tests/ --ignore=tests/test_hopper_bwd.py \
    --ignore=tests/test_sm_margin.py
stamp "other tests"
