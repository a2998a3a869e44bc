#!/usr/bin/env bash
# s54d: the deal-model rule as auto (static_deal_gives_way, kernels/hopper/bwd_deal_model.cuh; build/s54d = main with
# it: `python -m fa3nn.backends.hopper_build --out build/s54d/libfa3nn_hopper.so`, then `tar cJf build/s54d.tar.xz
# -C build s54d/libfa3nn_hopper.so`). Kernels unchanged, so the backward's tests check the launches only. Expected from
# s54c: auto = tile_inner (1.08-1.23x the persistent deal) at grid shapes 32-35 (one 8k x 24 / 40, 3 x 8k x 16, one 4k
# x 48), auto = pers_inner at 36 / 37 / 2 / 11 (5 x 2k x 16, 6 x 4k x 16, the paper's 2 x 8k x 16, one 8k x 32).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_start /tmp/fa3nn-s54d s54d
gpu_tests tests_bwd.log 120 tests/test_hopper_bwd.py tests/test_sm_margin.py
stamp "bwd tests"
gpu_table schedule_grid 200 scripts/bwd_schedule_grid.py --shapes 32 33 34 35 36 37 2 11
stamp grid
