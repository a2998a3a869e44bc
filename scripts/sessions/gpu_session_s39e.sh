#!/usr/bin/env bash
# Thirty-ninth session, fifth call: the dQ staging stores without bank conflicts (BwdConsumer::store_dq_slabs; s39d's
# Nsight Compute: every bulk-dQ STS.64 took 4 wavefronts against 2), every head dim, and V in registers for the MLA
# dP^T on top. Carry build/libs4.tar.xz: main's library at 0d25b0e (libfa3nn_hopper.so), bankfix/ (the fix, MLA dP^T
# from shared memory: this checkout built with -DFA3NN_MLA_SS_DP for flash_bwd_d192.cu) and bankfix_vregs/ (this
# checkout).
set -u
python3 -c "import tarfile; tarfile.open('build/libs4.tar.xz').extractall('build')"
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s39e
stamp start
workers=8; grep -q H100 "$out/gpu_state.txt" && workers=4
FA3NN_HOPPER_LIB=$PWD/build/bankfix_vregs/libfa3nn_hopper.so TEST_WORKERS=$workers gpu_pytest tests_bwd.log 300 \
    tests/test_hopper_bwd.py
stamp tests
timeout 200 python3 scripts/bwd_build_ab.py --headdims 64 128 256 --seqlens 1024 4096 16384 --rounds 5 \
    --compare bankfix=build/bankfix/libfa3nn_hopper.so --json "$out/ab_dims.json" > "$out/ab_dims.log" 2>&1
echo "ab dims rc $?"; grep -E "^\| |main kernel" "$out/ab_dims.log"
stamp "ab dims"
timeout 200 python3 scripts/bwd_build_ab.py --headdims 192 --headdim-v 128 --seqlens 512 2048 8192 16384 --rounds 5 \
    --compare bankfix=build/bankfix/libfa3nn_hopper.so bankfix_vregs=build/bankfix_vregs/libfa3nn_hopper.so \
    --json "$out/ab_mla.json" > "$out/ab_mla.log" 2>&1
echo "ab mla rc $?"; grep -E "^\| |main kernel" "$out/ab_mla.log"
stamp "ab mla"
