#!/usr/bin/env bash
# Prepared in the fortieth session (no device was lent then): the first run of the MLA backward's 2-CTA cluster
# variant (flash_bwd_mla.cuh "Clusters", variant "cluster"), written and compiled only. Carry build/libs.tar.xz
# holding this checkout's library, built here and packed (xz: 23 MB -> ~1.5 MB):
#   FA3NN_KERNELS_DIR=kernels/hopper python -m fa3nn.backends.hopper_build --out build/libfa3nn_hopper.so
#   tar cJf build/libs.tar.xz -C build libfa3nn_hopper.so
# 1. Smoke: the cluster test at 128 x 128 alone, stopping at the first failure (a phase bug traps after ~2^30 polls,
#    seconds, and leaves the context unusable: the rest of the cluster stages are then skipped).
# 2. Every cluster GPU test (error-ratio rule; dK / dV bitwise equal to bulk_dq's) and the other MLA tests.
# 3. A/B, same process, rounds interleaved: cluster against bulk_dq at the FA3 paper's shapes, 512-16k, causal and
#    not (scripts/bwd_build_ab.py), plus each one's main-kernel time at 512 (torch.profiler).
# Expected (NOTES "fortieth session"): 1.2-1.4x if the 64-key-block kernel is L2-bound as s39's profile says.
set -u
python3 -c "import tarfile; tarfile.open('build/libs.tar.xz').extractall('build')"
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s41a
stamp start
workers=8; grep -q H100 "$out/gpu_state.txt" && workers=4
TEST_WORKERS=1 gpu_pytest smoke.log 120 -x tests/test_hopper_bwd.py -k "cluster and 128x128"
smoke_ok=$(grep -cE "passed" "$out/smoke.log")
grep -E "FAILED|Error|error" "$out/smoke.log" | head -n 8
stamp smoke
if [ "$smoke_ok" -gt 0 ] && ! grep -q failed "$out/smoke.log"; then
    TEST_WORKERS=$workers gpu_pytest tests_mla.log 240 tests/test_hopper_bwd.py -k "mla or cluster"
    gpu_log_summary "$out/tests_mla.log"
    stamp tests
    timeout 200 python3 scripts/bwd_build_ab.py --variants bulk_dq cluster --headdims 192 --headdim-v 128 \
        --seqlens 512 2048 8192 16384 --rounds 5 --json "$out/ab_cluster.json" > "$out/ab_cluster.log" 2>&1
    echo "ab rc $?"; grep -E "^\| |main kernel" "$out/ab_cluster.log"
    stamp ab
else
    echo "smoke failed: cluster tests and A/B skipped"
    tail -n 40 "$out/smoke.log"
fi
