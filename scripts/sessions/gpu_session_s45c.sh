#!/usr/bin/env bash
# Forty-fifth session, third call: every GPU test on main at the merge of wip-d64-publish (library build/fin45/, built
# here from that tree but for a later comment-only kernel edit; carried as build/s45c.tar.xz), then the record rows:
# bench.py, our native backend against cuDNN and FlashAttention-2 through torch SDPA, d64 / d128, forward and
# backward, 512 / 2k / 8k / 16k, causal and not.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s45c s45c.tar.xz
export FA3NN_HOPPER_LIB=$PWD/build/fin45/libfa3nn_hopper.so
stamp start
gpu_pytest tests_all.log 290 tests/
gpu_log_summary "$out/tests_all.log"
stamp "all tests"
timeout 200 python3 scripts/bench.py --backends hopper cudnn fa2 --headdims 64 128 --directions fwd bwd \
    --seqlens 512 2048 8192 16384 --out-dir "$out" --tag rows > "$out/bench_rows.log" 2>&1
echo "bench rc $?"; grep -E "^\| (64|128) " "$out/rows.md"
stamp "bench"
gpu_archive s45c.tgz
