#!/usr/bin/env bash
# s54a: the record owed since s50 on main's kernels (build/s52p.tar.xz: main's kernels since dbd9970, comments aside),
# on whichever card comes (an H200 discharges NOTES Next 1; an H100 repeats s53a / s53b's rows and completes the
# GPU suite s53a's cap cut at 98%): bench.py's paper shapes; the schedule grid's Qwen2.5-7B 28 / 4 one causal 8k
# (shape 5; H100 s53a: tile_inner 1.14 / 1.09x auto, H200 s50c 0.99x) and d256's causal paper rows 2k / 8k (shapes
# 31 / 19; 0.95 / 0.95-0.98x cuDNN on the H100: does any order or schedule close it?); then every GPU test.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_start /tmp/fa3nn-s54a s52p
gpu_bench_rows 110
stamp bench
gpu_table schedule_grid 80 scripts/bwd_schedule_grid.py --shapes 5 31 19
stamp grid
gpu_all_tests 330 40
stamp "all tests"
