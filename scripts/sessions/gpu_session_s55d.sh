#!/usr/bin/env bash
# s55d: the backward grid's d64 causal MHA rows past kOuterPairsMax (shapes 42-51 and the paper's 8 x 2k x 32, 17):
# s55b measured key blocks outermost 1.14-1.31x auto (persistent innermost) at 20-24 pairs, where auto keeps innermost
# past 16 pairs (the bound set from d128's L2 losses at 32+ pairs, s50c). Predicted: outermost ahead up to 32-48 pairs
# at 4k (d64's Q / dO rows are half d128's bytes, so the L2 loss should start at twice d128's pair count), behind at
# 128+ (the paper's shapes); at 8k (one CTA per tile) tile_outer ahead where the per-tile model says (n_blocks 64).
# The rule landed at 48 pairs (persistent only, bb581b9) from rows 38-41 measured as explicit modes; this run measures
# it as auto past its measured points. build/s55p = main's library from bb581b9 on (`python -m
# fa3nn.backends.hopper_build --out build/s55p/libfa3nn_hopper.so`, `tar cJf build/s55p.tar.xz -C build
# s55p/libfa3nn_hopper.so`), so auto is the rule's choice and pers_inner / tile_inner the former auto's.
# LIB=s54f runs the former main's library instead (auto = the former choice).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_start /tmp/fa3nn-s55d "${LIB:-s55p}"
gpu_table schedule_grid 300 scripts/bwd_schedule_grid.py --shapes 42 43 44 45 46 47 48 49 50 51 17
stamp grid
# Then the backward's tests on it (auto's order at d64 over 17-48 pairs; kernels unchanged).
[ -n "${NO_TESTS:-}" ] || gpu_tests tests_bwd.log 150 tests/test_hopper_bwd.py tests/test_sm_margin.py
stamp "bwd tests"
