#!/usr/bin/env bash
# The FA3NN_MLA_ABLATE measurement builds it names exist in commit 315d608 only (removed after).
# Thirty-ninth session, second call: the MLA backward's dQ (s39a: without it a step ran 1.45-1.57x faster, while its
# staging stores and reduce-adds alone were 1.03-1.12x each). Carry build/libs2.tar.xz (this checkout's library and
# the FA3NN_MLA_ABLATE builds 3, 5, 6, 7; see gpu_session_s39a.sh for how they are built and packed):
#   5 the dQ GEMM's A read K-major from the dS^T tile (wrong values: dS^T for dS; timing only)
#   6 the dQ GEMM issued first in its own commit group, staged while dK / dV run (right values)
#   7 6 with 5's K-major A (timing only)
set -u
python3 -c "import tarfile; tarfile.open('build/libs2.tar.xz').extractall('build')"
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s39b
stamp start
timeout 240 python3 scripts/bwd_build_ab.py --headdims 192 --headdim-v 128 --seqlens 2048 8192 --rounds 5 \
    --compare a3_nodq=build/ablate3/libfa3nn_hopper.so a5_dqkmajor=build/ablate5/libfa3nn_hopper.so \
    a6_dqfirst=build/ablate6/libfa3nn_hopper.so a7_dqfirst_kmajor=build/ablate7/libfa3nn_hopper.so \
    --json "$out/mla_ablate2.json" > "$out/mla_ablate2.log" 2>&1
echo "ablate rc $?"; grep -E "^\| |main kernel" "$out/mla_ablate2.log"
stamp ablate
FA3NN_HOPPER_LIB=$PWD/build/ablate6/libfa3nn_hopper.so TEST_WORKERS=4 gpu_pytest tests_a6.log 200 \
    tests/test_hopper_bwd.py -k mla
stamp tests
