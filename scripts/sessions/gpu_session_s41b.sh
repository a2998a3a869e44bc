#!/usr/bin/env bash
# Forty-first session, after s41a: the candidate library (branch wip/dq-under-dk: d128's default backward = bulk_dq in
# FlashAttention-3's order, its varlen / window / softcap kernels instantiated with it). Carry build/cand.tar.xz
# (build/cand/libfa3nn_hopper.so; /tmp/build41c.sh, NOTES "forty-first session").
# 1. Every d128 backward GPU test of tests/test_hopper_bwd.py (dense, variants, GQA, varlen, windows, softcap, widths,
#    persistent schedules) and the backward / gradient tests elsewhere, on the candidate.
# 2. scripts/bench.py backward at d128 (hopper against cuDNN and FA2, same run, 2 balanced rounds).
set -u
python3 -c "import tarfile; tarfile.open('build/cand.tar.xz').extractall('build')"
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s41b
export FA3NN_HOPPER_LIB=$PWD/build/cand/libfa3nn_hopper.so
stamp start
workers=8; grep -q H100 "$out/gpu_state.txt" && workers=4
TEST_WORKERS=$workers gpu_pytest tests_bwd128.log 280 tests/test_hopper_bwd.py -k "128 and not 256"
gpu_log_summary "$out/tests_bwd128.log"
stamp tests
timeout 230 python3 scripts/bench.py --backends hopper cudnn fa2 --headdims 128 --seqlens 512 2048 8192 16384 \
    --directions bwd --rounds 2 --out-dir "$out" --tag bwd128 > "$out/bench_bwd128.log" 2>&1
echo "bench rc $?"; grep -E "^\| [0-9]+ " "$out/bwd128.md"
stamp bench
