#!/usr/bin/env bash
# s52a (branch wip/mha-tile-outer, library build/s52p/ in build/s52p.tar.xz, C ABI 9 = main's s52o + the MHA
# per-tile few-pair rule below; run on it since device starts kept failing): auto runs dense causal
# GQA/MQA that it deals one CTA per tile with key blocks outermost per batch (flash_bwd_launch.cuh tile_order;
# grid_order 3 was s51o's benchmark-only order). Predicted from s51a (H100): the llama-1b recipe's 8 x 4k 32 / 8 d64
# causal auto ~1.65x s51a's auto, 2 x 4k 32 / 8 d128 ~1.10x, MQA 2 x 8k 16 / 1 (4 parts) ~1.03x, every batch-1 row
# unchanged. This is an H200 if one comes: s50c's H200 had whole outermost at 0.98 and innermost 0.94 of auto at 8 x 4k,
# so ~1.0 there, to be measured. Then the whole grid (the H200's rows for every shape, owed since s50c) and the GQA
# shapes table; MHA per tile over few pairs (SHAPES 15, 25-30: d64 1 x 8k x 16's outermost 1.10x was the schedule
# model's 1.107 for its 64 key blocks x 16 pairs; it predicts 1.23 / 1.11 / 1.00 / 1.00 / 1.23 / 1.56 at 25-30).
# GQA rows also in 2 and 4 parts (--parts): Llama-3-8B 2 x 4k causal whole groups ran 0.82x its MHA twin in s51a.
# The branch: causal MHA one CTA per tile over <= 16 pairs of <= 96 key blocks runs outermost (rows 15, 25, 26,
# 29, 30 are its auto; 27 / 28 keep innermost). The record table and the rest of the suite: gpu_session_s52c.sh.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_start /tmp/fa3nn-s52a s52p
gpu_tests tests_bwd.log 120 tests/test_hopper_bwd.py tests/test_sm_margin.py
stamp "bwd tests"
# the rule's rows first (GQA at batch > 1, then batch 1), then the MHA rows
gpu_table schedule_grid 180 scripts/bwd_schedule_grid.py --parts 2 4 \
    --shapes 1 6 23 5 20 21 22 24 15 25 26 27 28 29 30 0 3 2 10 8 9 16 17 4 7 11 12 13 14 18 19
stamp grid
gpu_table gqa_bwd 50 scripts/gqa_bwd_shapes.py
stamp gqa
gpu_archive s52a.tgz
