#!/usr/bin/env bash
# s50b: the backward's CTA schedules over causal shapes (scripts/bwd_schedule_grid.py: auto, per tile and persistent
# in both grid orders, GQA with whole groups and auto's parts, cuDNN beside), on the GQA-parts library (build/s49/,
# s50a's tests passed on an H100). For auto's rule on both cards: s50a (H100) had per-tile key-blocks-outer 1.66x
# auto at 8 heads x one causal 8k, and whole-group GQA causal at 0.54x MHA for 8 x 4k 32 / 8 d64 (H200 s49a 0.98x).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s50b s49.tar.xz
export FA3NN_HOPPER_LIB=$PWD/build/s49/libfa3nn_hopper.so
stamp start
cat "$out/gpu_state.txt"
timeout 240 python3 scripts/bwd_schedule_grid.py --json "$out/schedule_grid.json" > "$out/schedule_grid.log" 2>&1
echo "grid rc $?"; grep -E "^\|" "$out/schedule_grid.log"; tail -n 3 "$out/schedule_grid.log" | grep -v "^|"
stamp grid
gpu_archive s50b.tgz
