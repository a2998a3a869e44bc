#!/usr/bin/env bash
# Prepared in the forty-first session, not run: branch wip/bwd-fast-exp2 (the backward's P^T with fast_exp2 instead of
# exp2f; NOTES "forty-first session"). Carry build/fexp.tar.xz: build/cand/libfa3nn_hopper.so (main's library at
# 1e10d8c, the baseline) and build/fexp/libfa3nn_hopper.so (the branch's), each built with
#   FA3NN_KERNELS_DIR=kernels/hopper python -m fa3nn.backends.hopper_build --out build/.../libfa3nn_hopper.so
#   tar cJf build/fexp.tar.xz -C build cand/libfa3nn_hopper.so fexp/libfa3nn_hopper.so
# 1. Every backward GPU test of tests/test_hopper_bwd.py on the branch's library.
# 2. bwd_build_ab.py: main's default against the branch's, d64 / d128 / d256 and 192 / 128.
# Keep the branch if nothing loses beyond the spread (predicted 0-2%).
set -u
python3 -c "import tarfile; tarfile.open('build/fexp.tar.xz').extractall('build')"
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s41g
export FA3NN_HOPPER_LIB=$PWD/build/cand/libfa3nn_hopper.so
stamp start
workers=8; grep -q H100 "$out/gpu_state.txt" && workers=4
FA3NN_HOPPER_LIB=$PWD/build/fexp/libfa3nn_hopper.so TEST_WORKERS=$workers gpu_pytest tests_fexp.log 240 \
    tests/test_hopper_bwd.py
gpu_log_summary "$out/tests_fexp.log"
stamp tests
timeout 200 python3 scripts/bwd_build_ab.py --headdims 64 128 256 --seqlens 512 2048 16384 --rounds 5 \
    --compare fexp=build/fexp/libfa3nn_hopper.so --json "$out/ab_fexp.json" > "$out/ab_fexp.log" 2>&1
echo "ab rc $?"; grep -E "^\| |main kernel" "$out/ab_fexp.log"
timeout 100 python3 scripts/bwd_build_ab.py --headdims 192 --headdim-v 128 --seqlens 2048 16384 --rounds 5 \
    --compare fexp=build/fexp/libfa3nn_hopper.so --json "$out/ab_fexp_mla.json" > "$out/ab_fexp_mla.log" 2>&1
echo "ab mla rc $?"; grep -E "^\| |main kernel" "$out/ab_fexp_mla.log"
stamp ab
