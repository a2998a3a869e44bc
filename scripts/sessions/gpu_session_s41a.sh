#!/usr/bin/env bash
# Forty-first session: d128's backward in FlashAttention-3's order (measurement define FA3NN_BWD_DQ_UNDER_DK in
# flash_bwd.cuh's bwd_consumer, variant bulk_dq): dV under the dS^T store and barrier, dQ then dK, dQ's hand-off under
# dK. Carry build/dqdk.tar.xz holding build/dqdk_v1 / dqdk_v2 (the define = 1 / 2; every unit but d128 is this
# checkout's) and build/libfa3nn_hopper.so (this checkout's library, the baseline):
#   /tmp/build41.sh (NOTES "forty-first session"), then
#   tar cJf build/dqdk.tar.xz -C build libfa3nn_hopper.so dqdk_v1/libfa3nn_hopper.so dqdk_v2/libfa3nn_hopper.so
# d64's m128 (its default) takes the same order in these builds (its window / softcap kernels spill there: not timed).
# 1. The d128 bulk_dq and d64 m128 GPU tests (dK / dV bitwise red_dq's, dQ by the error-ratio rule, GQA), both builds.
# 2. bwd_build_ab.py at d128: main's bulk_dq_overlap (the default) and bulk_dq against v1 / v2's bulk_dq; at d64
#    main's m128 against v1 / v2's.
set -u
python3 -c "import tarfile; tarfile.open('build/dqdk.tar.xz').extractall('build')"
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s41a
stamp start
workers=8; grep -q H100 "$out/gpu_state.txt" && workers=4
for v in v1 v2; do
    FA3NN_HOPPER_LIB=$PWD/build/dqdk_$v/libfa3nn_hopper.so TEST_WORKERS=$workers gpu_pytest tests_$v.log 100 \
        tests/test_hopper_bwd.py -k "(variants_match or gqa_in_kernel) and (128-bulk_dq or 64-m128) and not overlap"
    stamp "tests $v"
done
timeout 230 python3 scripts/bwd_build_ab.py --headdims 128 --seqlens 512 2048 8192 16384 --rounds 5 \
    --variants bulk_dq_overlap bulk_dq --compare v1=build/dqdk_v1/libfa3nn_hopper.so@bulk_dq \
    v2=build/dqdk_v2/libfa3nn_hopper.so@bulk_dq --json "$out/ab_d128.json" > "$out/ab_d128.log" 2>&1
echo "ab rc $?"; grep -E "^\| |main kernel" "$out/ab_d128.log"
stamp ab
timeout 150 python3 scripts/bwd_build_ab.py --headdims 64 --seqlens 512 2048 16384 --rounds 5 \
    --variants m128 --compare v1=build/dqdk_v1/libfa3nn_hopper.so@m128 v2=build/dqdk_v2/libfa3nn_hopper.so@m128 \
    --json "$out/ab_d64.json" > "$out/ab_d64.log" 2>&1
echo "ab64 rc $?"; grep -E "^\| |main kernel" "$out/ab_d64.log"
stamp ab64
