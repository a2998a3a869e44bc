#!/usr/bin/env bash
# s57c: auto's new d64 rule run as auto (81015ec: causal d64 one CTA per tile takes key blocks outermost up to 28
# pairs of <= 64 key blocks). Carry build/s57r.tar.xz (main at 81015ec: `python -m fa3nn.backends.hopper_build --out
# build/s57r/libfa3nn_hopper.so`). Predicted: auto = tile_outer (1.00) at one 8k x 20 / 24 / 28 heads (rows 52, 50,
# 53), 1.04-1.06x tile_inner; rows 15 (16 heads: outermost before too) and 51 (32: innermost kept) unchanged.
# Then the backward's GPU tests (the launcher changed; the kernels did not).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_start /tmp/fa3nn-s57c s57r
gpu_table schedule_grid 60 scripts/bwd_schedule_grid.py --shapes 52 50 53 15 51 --rounds 3
stamp grid
gpu_tests tests_bwd.log 100 tests/test_hopper_bwd.py
stamp "bwd tests"
