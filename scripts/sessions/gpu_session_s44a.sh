#!/usr/bin/env bash
# Prepared in the forty-third session for the next one's first call: mla_keys with its descriptors hoisted out of the
# step loop (branch wip/mla-keys-descs: s43d's kernel with only the spill fix's first-step test; 0 spills) against
# main's (descriptors made in the loop, 0.962x s43d's at 8k in s43f). Build both here first (no GPU needed):
#   FA3NN_KERNELS_DIR=kernels/hopper python -m fa3nn.backends.hopper_build --out build/main/libfa3nn_hopper.so
#   (in a worktree of wip/mla-keys-descs, main merged in) ... --out <this checkout>/build/descs/libfa3nn_hopper.so
#   python3 scripts/check_kernels.py --library build/descs/libfa3nn_hopper.so   (0 spills)
#   tar cJf build/s44a.tar.xz --exclude='*.ptxas.log' -C build main descs
# Then: the MLA tests on descs/, and descs against main at 512 / 2k / 8k / 16k (3 rounds).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s44a s44a.tar.xz
export FA3NN_HOPPER_LIB=$PWD/build/descs/libfa3nn_hopper.so
stamp start
gpu_pytest tests_mla.log 120 tests/test_hopper_bwd.py -k "mla or c_abi"
gpu_log_summary "$out/tests_mla.log"
stamp tests
timeout 120 python3 scripts/bwd_build_ab.py --headdims 192 --headdim-v 128 --variants mla_keys \
    --compare main=build/main/libfa3nn_hopper.so@mla_keys --seqlens 512 2048 8192 16384 --rounds 3 \
    --json "$out/ab.json" > "$out/ab.log" 2>&1
echo "ab rc $?"; grep -E "^\| " "$out/ab.log"
stamp ab
gpu_archive s44a.tgz
