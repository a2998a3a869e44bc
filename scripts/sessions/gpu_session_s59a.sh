#!/usr/bin/env bash
# s59a: a short call for little device time (s59 had ~500 s left after failed starts): first the GPU tests of what
# this session and s58 changed in Python (delayed scaling's update only in sync_amax and its checkpoint + compile
# tests on the GPU's FP8 path, the checkpoint create_graph fix in fa3nn.ops, s58's partial cu_seqlens spans), then,
# if S59_END allows, bench.py's paper rows (the record owed since s50). Carry build/s57r.tar.xz (main's kernels).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_start /tmp/fa3nn-s59a s57r
gpu_tests tests_changed.log 150 tests/test_fp8_api.py tests/test_row_spans.py tests/test_varlen_and_gradcheck.py \
    tests/test_fp8_state.py
stamp "changed tests"
[ $((${S59_END:-300} - SECONDS)) -gt 140 ] && gpu_bench_rows 130 && stamp bench
