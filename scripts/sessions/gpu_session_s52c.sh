#!/usr/bin/env bash
# s52c: s52a and s52b cut to fit one call (eight device starts failed by 05:40, 1064 s of the 1800 left), on
# build/s52p (wip/mha-tile-outer: main's GQA per-batch rule + the MHA per-tile few-pair rule; predictions in
# gpu_session_s52a.sh and benchmarks/NOTES.md): the backward's tests, the rules' grid rows (GQA with 2 / 4 parts
# too), bench.py's paper shapes (d64 / d128 / d256), then every other GPU test (the H200 record rows owed since s50 / s51).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_start /tmp/fa3nn-s52c s52p
gpu_tests tests_bwd.log 100 tests/test_hopper_bwd.py tests/test_sm_margin.py
stamp "bwd tests"
gpu_table schedule_grid 130 scripts/bwd_schedule_grid.py --parts 2 4 --shapes 1 6 15 25 26 29 30 27 23 28 5 20 24
stamp grid
gpu_bench_rows 110
stamp bench
gpu_tests tests_rest.log 200 tests/ --ignore=tests/test_hopper_bwd.py --ignore=tests/test_sm_margin.py
stamp "rest of the suite"
gpu_archive s52c.tgz
