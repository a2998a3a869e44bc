#!/usr/bin/env bash
# s53b: the H200's half of s53a (which ran on an H100) in the ~330 s of device time left: the rules' grid rows and
# bench.py's paper shapes on build/s52p (main's kernels since dbd9970 but comments), no tests.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_start /tmp/fa3nn-s53b s52p
gpu_table schedule_grid 60 scripts/bwd_schedule_grid.py --parts 2 4 --shapes 1 6 15 25 26 29 30 27 23 28 5 20 24
stamp grid
gpu_bench_rows 90
stamp bench
