#!/usr/bin/env bash
# s49c: GQA in parts inside the kernel (C ABI 8: launch's kv_parts, tiles of group / parts query heads reading their
# K/V head by a shift, fp32 partial dK / dV summed once; no K/V copies), library build/s49/ in build/s49.tar.xz
# (453 kernels, 0 spills, registers as build/final47's). First the GQA shapes (auto parts x whole groups x cuDNN;
# predicted: s49a's gains without the copies, 70B-TP8 8k ~1.9x non-causal with 2 parts, ~2x causal; no loss where
# the new non-causal rule keeps 128 tiles whole), then the backward's GPU tests and the forward's (every backward
# kernel changed: the dK / dV store's fp32 branch, the K/V head shift; ~500 s of device time were left).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s49c s49.tar.xz
export FA3NN_HOPPER_LIB=$PWD/build/s49/libfa3nn_hopper.so
stamp start
cat "$out/gpu_state.txt"
timeout 60 python3 scripts/gqa_bwd_shapes.py --json "$out/gqa_bwd.json" > "$out/gqa_bwd.log" 2>&1
echo "gqa rc $?"; grep -E "^\|" "$out/gqa_bwd.log"; tail -n 3 "$out/gqa_bwd.log" | grep -v "^|"
stamp gqa
gpu_pytest tests_bwd.log 150 tests/test_hopper_bwd.py tests/test_sm_margin.py
gpu_log_summary "$out/tests_bwd.log"
stamp tests
gpu_archive s49c.tgz
