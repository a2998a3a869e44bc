#!/usr/bin/env bash
# mla_keys without its 8 B causal spill (CI's no-spill test: the CTA's first step from tiles.iter, descriptors made
# where used): carry build/s43f.tar.xz (mlak2/ = this checkout's library, mlak/ = s43d / s43e's). The MLA tests on
# mlak2, then mla_keys on mlak2 against mlak (same process, 2 rounds).
set -u
python3 -c "import tarfile; tarfile.open('build/s43f.tar.xz').extractall('build')"
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s43f
export FA3NN_HOPPER_LIB=$PWD/build/mlak2/libfa3nn_hopper.so
stamp start
export TEST_WORKERS=8; grep -q H100 "$out/gpu_state.txt" && export TEST_WORKERS=4
gpu_pytest tests_mla.log 90 tests/test_hopper_bwd.py -k "mla or c_abi"
gpu_log_summary "$out/tests_mla.log"
stamp tests
timeout 50 python3 scripts/bwd_build_ab.py --headdims 192 --headdim-v 128 --variants mla_keys \
    --compare s43d=build/mlak/libfa3nn_hopper.so@mla_keys --seqlens 2048 8192 --rounds 2 \
    --json "$out/ab.json" > "$out/ab.log" 2>&1
echo "ab rc $?"; grep -E "^\| " "$out/ab.log"
stamp ab
gpu_archive s43f.tgz
