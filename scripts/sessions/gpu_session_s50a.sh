#!/usr/bin/env bash
# s50a: s49c (GQA in parts inside the kernel, C ABI 8, library build/s49/ from build/s49.tar.xz, never yet run on a
# GPU: GQA shapes auto parts vs whole groups vs cuDNN, then the backward's GPU tests incl. the parts tests), then
# the MHA backward's schedules at few causal tiles (scripts/bwd_few_tiles_ab.py; the list-scheduling model says
# persistent key-blocks-innermost keeps 0.55 of the SMs busy at 8 heads x one causal 8k sequence, per-tile
# key-blocks-outermost ~0.99; s49a measured auto there at 0.78x cuDNN).
# (scripts/bwd_few_tiles_ab.py was later folded into scripts/bwd_schedule_grid.py: --causal both over its modes.)
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s50a s49.tar.xz
export FA3NN_HOPPER_LIB=$PWD/build/s49/libfa3nn_hopper.so
stamp start
cat "$out/gpu_state.txt"
timeout 60 python3 scripts/gqa_bwd_shapes.py --json "$out/gqa_bwd.json" > "$out/gqa_bwd.log" 2>&1
echo "gqa rc $?"; grep -E "^\|" "$out/gqa_bwd.log"; tail -n 3 "$out/gqa_bwd.log" | grep -v "^|"
stamp gqa
gpu_pytest tests_bwd.log 170 tests/test_hopper_bwd.py tests/test_sm_margin.py
gpu_log_summary "$out/tests_bwd.log"
stamp tests
timeout 120 python3 scripts/bwd_few_tiles_ab.py --json "$out/few_tiles.json" > "$out/few_tiles.log" 2>&1
echo "few tiles rc $?"; grep -E "^\|" "$out/few_tiles.log"; tail -n 3 "$out/few_tiles.log" | grep -v "^|"
stamp few_tiles
gpu_archive s50a.tgz
