#!/usr/bin/env bash
# s55b: backward variant m80 (80-row query blocks, dQ transposed; kernels/hopper/flash_bwd.cuh kDQTransposed) at d128,
# then scripts/sessions/gpu_session_s54e.sh (the forward's few-pair deal rule and the backward grid's rows 38-41, 32,
# 33), so one machine start serves both. Carry build/s55m.tar.xz, build/s55n.tar.xz, build/s54f.tar.xz and
# build/s52p.tar.xz. build/s55m = 451b359 of branch wip/bwd-m80, m80 in the default order (`python -m
# fa3nn.backends.hopper_build --out build/s55m/libfa3nn_hopper.so` in a worktree of it, `tar cJf build/s55m.tar.xz -C
# build s55m/libfa3nn_hopper.so`). First its GPU tests (dK / dV bitwise equal to red_dq's, dQ by the error-ratio rule;
# GQA, GQA in parts, persistent), then bulk_dq (the default) x m80 in one process at the paper's d128 shapes, causal and
# not. Predicted: m80 1.03-1.08x bulk_dq non-causal from 2k (5% less shared-memory traffic per FLOP, 20% fewer per-step
# waits; FlashAttention-3's tile, whose H200 backward runs 1.05-1.11x ours there), causal ~1.0 (more masked work on the
# diagonal blocks); 512 below 1 (the workspace rounding, 640 rows against 512, and a third of the steps on diagonal or
# ragged blocks). build/s55n (5ac5285, the branch's head) is m80 in FlashAttention-3's order (dV issued before dS is
# stored and waited for before dQ^T, dQ^T staged under dK), timed beside them as m80_fa3order (its tests not run here):
# predicted +1-3% over s55m's m80 (m64's FA3 order measured +0.5-3.8% over the default order).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_start /tmp/fa3nn-s55b s55m
gpu_tests tests_m80.log 200 tests/test_hopper_bwd.py -k "m80 or workspace"
stamp "m80 tests"
python3 -c "import tarfile; tarfile.open('build/s55n.tar.xz').extractall('build')"
timeout 200 python3 scripts/bwd_build_ab.py --variants bulk_dq m80 --headdims 128 --seqlens 512 2048 8192 16384 \
    --rounds 5 --compare m80_fa3order=build/s55n/libfa3nn_hopper.so@m80 --json "$out/m80_ab.json" \
    > "$out/m80_ab.log" 2>&1
echo "ab rc $?"; grep -E "^\|" "$out/m80_ab.log"; tail -n 3 "$out/m80_ab.log"
stamp ab
# M80_ONLY=1: stop here (a call with little device time left).
[ -n "${M80_ONLY:-}" ] || bash "$(dirname "$0")/gpu_session_s54e.sh"
