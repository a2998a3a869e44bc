#!/usr/bin/env bash
# s51a (branch wip/bwd-outer-few-pairs; library build/s51o/ in build/s51o.tar.xz, C ABI 9: s50o + grid_order 3,
# key blocks outermost per batch, in the grid as tile_batch / pers_batch): the backward's auto with key blocks outermost for causal MHA that auto runs persistent over <= 16 (head, batch) pairs (auto_key_blocks_outer)
# and kv_parts' non-causal wave-fill rule. Predicted (from s50c's explicit modes, H200): auto at 1 x 8k x 8 heads
# d128 causal 1.67x s50c's auto (349 -> ~584 TFLOP/s), 1 x 8k x 16 1.43x, 2 x 4k x 8 1.42x, every other grid row
# unchanged (same modes); Qwen TP4 7 / 1 non-causal 7 parts ~1.6x whole groups (322 -> ~520; MHA's same tiles 540).
# Also launch no longer zeroes the fp32 partial dK / dV (every row a tile owns is written; the parts tests now fill
# them with NaN). The whole GPU suite is gpu_session_s51b.sh. On an H100 the grid
# also answers why whole-group GQA causal ran 0.54x MHA at 8 x 4k 32 / 8 d64 in s50a (0.97-1.00 on the H200 in s50c):
# if L2 (innermost or per batch well above outermost there), per batch keeps outermost's long-tiles-first start.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s51a s51o.tar.xz
export FA3NN_HOPPER_LIB=$PWD/build/s51o/libfa3nn_hopper.so
stamp start
cat "$out/gpu_state.txt"
gpu_pytest tests_bwd.log 120 tests/test_hopper_bwd.py tests/test_sm_margin.py
gpu_log_summary "$out/tests_bwd.log"
stamp "bwd tests"
# the telling shapes first (the H100 GQA row, the few-pair rows, the many-pair MHA rows), so a timeout cuts the rest
gpu_table schedule_grid 150 scripts/bwd_schedule_grid.py \
    --shapes 1 0 3 2 6 10 8 9 16 17 5 4 7 11 12 13 14 15 18 19 20 21 22 23 24
stamp grid
gpu_table gqa_bwd 50 scripts/gqa_bwd_shapes.py
stamp gqa
gpu_archive s51a.tgz
