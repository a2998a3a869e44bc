#!/usr/bin/env bash
# s56a: the record owed since s50 on main's library (build/s55p = c28bd39's kernels: `python -m
# fa3nn.backends.hopper_build --out build/s55p/libfa3nn_hopper.so`, `tar cJf build/s55p.tar.xz -C build
# s55p/libfa3nn_hopper.so`), on whichever card comes (an H200 discharges NOTES Next 1): bench.py's paper shapes; the
# backward grid's d64 causal rows past 16 pairs measured as auto (s55d's rows 42-51 and 17: auto takes key blocks
# outermost up to 48 pairs since bb581b9; predicted ahead of pers_inner to 32-48 pairs at 4k, behind at 128+), the
# Qwen 28 / 4 row (5) and the deal-rule rows 32-37; the forward's few-pair deal against s52p's one-pair deal (carry
# build/s52p.tar.xz and build/s56f.tar.xz too); the FP8 forward's deals at few pairs (fwd_deal_shapes.py --fp8). Every
# GPU test runs in the next call (scripts/sessions/gpu_session_s56b.sh).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_start /tmp/fa3nn-s56a s55p
gpu_bench_rows 120
stamp bench
gpu_table schedule_grid 200 scripts/bwd_schedule_grid.py --shapes 42 43 44 45 46 47 48 49 50 51 17 5 32 33 34 35 36 37
stamp grid
for lib in s52p s56f; do
    python3 -c "import tarfile, sys; tarfile.open(sys.argv[1]).extractall('build')" "build/$lib.tar.xz"
done
timeout 100 python3 scripts/fwd_deal_shapes.py --headdims 128 64 --rounds 3 \
    --compare before=build/s52p/libfa3nn_hopper.so --json "$out/deals.json" > "$out/deals.log" 2>&1
echo "deals rc $?"; grep -E "^\|" "$out/deals.log"; tail -n 3 "$out/deals.log"
stamp deals
# The FP8 forward's deals at few pairs on build/s56f (branch wip/fp8-few-pair-deal: main + the few-pair rule for
# FP8 dense calls), main's default deal (s55p) beside it: simulated one pair 1.25-1.68 x one section 1.01-1.03 at one
# 4k x 8-24 heads and one 2k x 16, so s56f's default (there one section) predicted 1.2-1.5x main's, 1.00 at one 2k x
# 32 and the paper's 4 x 4k / 8 x 2k (one pair in both builds).
FA3NN_HOPPER_LIB=$PWD/build/s56f/libfa3nn_hopper.so timeout 80 python3 scripts/fwd_deal_shapes.py --fp8 --rounds 3 \
    --compare main=build/s55p/libfa3nn_hopper.so --json "$out/deals_fp8.json" > "$out/deals_fp8.log" 2>&1
echo "deals fp8 rc $?"; grep -E "^\|" "$out/deals_fp8.log"; tail -n 3 "$out/deals_fp8.log"
stamp "deals fp8"
