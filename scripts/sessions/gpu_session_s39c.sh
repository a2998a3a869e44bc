#!/usr/bin/env bash
# Thirty-ninth session, third call: V's A fragments in registers for the MLA backward's dP^T (RS form; s39a/s39b: the
# kernel is shared-memory-bandwidth bound, and the SS dP^T re-reads V, 16 KB, in both warpgroups every step). Carry
# build/libs3.tar.xz: the session-start library (libfa3nn_hopper.so, main at 0d25b0e) and vregs/ (this checkout).
set -u
python3 -c "import tarfile; tarfile.open('build/libs3.tar.xz').extractall('build')"
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s39c
stamp start
FA3NN_HOPPER_LIB=$PWD/build/vregs/libfa3nn_hopper.so TEST_WORKERS=4 gpu_pytest tests_vregs.log 200 \
    tests/test_hopper_bwd.py -k "mla or d256 or 256"
stamp tests
timeout 300 python3 scripts/bwd_build_ab.py --headdims 192 --headdim-v 128 --seqlens 512 2048 8192 16384 --rounds 5 \
    --compare vregs=build/vregs/libfa3nn_hopper.so --json "$out/mla_vregs.json" > "$out/mla_vregs.log" 2>&1
echo "ab rc $?"; grep -E "^\| |main kernel" "$out/mla_vregs.log"
stamp ab
