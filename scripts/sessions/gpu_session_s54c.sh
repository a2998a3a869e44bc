#!/usr/bin/env bash
# s54c: is the persistent backward's static deal what loses at some causal pair counts? model_bwd_gqa_parts.py's
# schedule functions (no L2) put the static boustrophedon deal (auto's persistent, key blocks innermost) at 0.77-0.88
# busy for 24 / 28 / 36-56 pairs of 64 key blocks against 0.96 at 32 / 64 pairs, and per tile (the hardware's list
# scheduling in launch order) at 0.90-0.94; Qwen 28 / 4's per tile measured 1.09-1.15x auto on the H100 (s51a, s53a,
# s53b, s54a). Grid shapes 32-37 (d128 causal MHA), predicted per tile innermost x persistent innermost: 1 x 8k x 24
# 1.17, 1 x 8k x 40 1.11, 3 x 8k x 16 1.13, 1 x 4k x 48 1.05, 5 x 2k x 16 0.94, 6 x 4k x 16 0.95; the paper's 2 x 8k
# x 16 (shape 2) 0.955. If the measured ratios track these, auto can choose by the modelled balance; main's kernels.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_start /tmp/fa3nn-s54c s52p
gpu_table schedule_grid 200 scripts/bwd_schedule_grid.py --shapes 32 33 34 35 36 37 2 5
stamp grid
