#!/usr/bin/env bash
# s50c: GQA parts of any divisor (C ABI 9, library build/s50div/ in build/s50div.tar.xz: 453 kernels, 0 spills,
# registers as build/s49's). First the backward's schedules over causal shapes (scripts/bwd_schedule_grid.py: auto,
# per tile / persistent x both grid orders, GQA whole groups and auto parts, cuDNN; for auto's rule: s50a had per-tile
# outermost 1.66x auto at 8 heads x one causal 8k and whole-group GQA causal 0.54x MHA at 8 x 4k 32 / 8 d64), then
# the backward's GPU tests (the new 3 / 6 / 7-part test among them), then the GQA shapes (Qwen's 7 parts: predicted
# ~1.2x whole groups causal at one 8k sequence, MHA's 510 against 420 TFLOP/s in s50a).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s50c s50div.tar.xz
export FA3NN_HOPPER_LIB=$PWD/build/s50div/libfa3nn_hopper.so
stamp start
cat "$out/gpu_state.txt"
# ~385 s of device time left: the parts tests alone (every kernel's, the new any-divisor one), then the grid
gpu_pytest tests_bwd.log 80 tests/test_hopper_bwd.py tests/test_sm_margin.py -k "parts or margin"
gpu_log_summary "$out/tests_bwd.log"
stamp tests
gpu_table schedule_grid 130 scripts/bwd_schedule_grid.py
stamp grid
gpu_table gqa_bwd 60 scripts/gqa_bwd_shapes.py
stamp gqa
gpu_archive s50c.tgz
