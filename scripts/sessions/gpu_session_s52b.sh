#!/usr/bin/env bash
# s52b (build/s52p of wip/mha-tile-outer, the warm machine after s52a): owed on an H200 since the kernel changes of s50 / s51 ran only on
# an H100: bench.py's paper-shape table (hopper, cuDNN, FA2; d64 / d128 / d256, forward and backward, 512-16k,
# causal and not), then every GPU test but the backward's files (s52a ran those).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_start /tmp/fa3nn-s52b s52p
timeout 260 python3 scripts/bench.py --backends hopper cudnn fa2 --headdims 64 128 256 --directions fwd bwd \
    --seqlens 512 2048 8192 16384 --out-dir "$out" --tag rows > "$out/bench_rows.log" 2>&1
echo "bench rc $?"; grep -E "^\| (64|128|256) " "$out/rows.md"
stamp bench
gpu_tests tests_rest.log 260 tests/ --ignore=tests/test_hopper_bwd.py --ignore=tests/test_sm_margin.py
stamp "rest of the suite"
gpu_archive s52b.tgz
