#!/usr/bin/env bash
# Forty-first session, the one call if the device comes once: the candidate (branch wip/dq-under-dk: d128's default
# backward = bulk_dq in FlashAttention-3's order, = s41a's v1 at d128) tested and timed against main's library.
# Carry build/cand_main.tar.xz: build/libfa3nn_hopper.so (main's kernels) and build/cand/libfa3nn_hopper.so
# (/tmp/build41c.sh; NOTES "forty-first session").
# 1. Every d128 test of tests/test_hopper_bwd.py but MLA's on the candidate (dense, variants, GQA, varlen, windows,
#    softcap, store widths, persistent schedules).
# 2. bwd_build_ab.py at d128: main's bulk_dq_overlap (its default) and bulk_dq, the candidate's bulk_dq.
set -u
python3 -c "import tarfile; tarfile.open('build/cand_main.tar.xz').extractall('build')"
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s41c
stamp start
workers=8; grep -q H100 "$out/gpu_state.txt" && workers=4
FA3NN_HOPPER_LIB=$PWD/build/cand/libfa3nn_hopper.so TEST_WORKERS=$workers gpu_pytest tests_cand.log 240 \
    tests/test_hopper_bwd.py -k "128 and not 256 and not mla"
gpu_log_summary "$out/tests_cand.log"
stamp tests
timeout 230 python3 scripts/bwd_build_ab.py --headdims 128 --seqlens 512 2048 8192 16384 --rounds 5 \
    --variants bulk_dq_overlap bulk_dq --compare cand=build/cand/libfa3nn_hopper.so@bulk_dq \
    --json "$out/ab_d128.json" > "$out/ab_d128.log" 2>&1
echo "ab rc $?"; grep -E "^\| |main kernel" "$out/ab_d128.log"
stamp ab
