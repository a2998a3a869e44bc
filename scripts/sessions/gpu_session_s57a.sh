#!/usr/bin/env bash
# s57a (gpu_session_lseahead.sh of s56, renamed): the backward's lse pairs loaded ahead of the wait for S^T (branch
# wip/bwd-lse-ahead, f9692bd; BwdConsumer::kLseAhead; the column-split step of d256 and MLA's panel split too).
# Nsight Compute of main's d128 backward (s56c, H100, 2 x 8k x 16 non-causal) put 6.5% of the kernel's stall samples
# on probs' first FFMA (short scoreboard: its LDS.64 of lse issued after WARPGROUP.DEPBAR), 9.7% on FFMA in all; in
# the branch the LDS are issued before the DEPBAR (SASS checked; d128 the same 2832 instructions; 0 spills in every
# backward unit). Carry build/s56l.tar.xz (the branch: 8 pairs ahead, all of d128's, half of d64's m128, d256's
# column split all 4 of its; `python -m fa3nn.backends.hopper_build --out build/s56l/libfa3nn_hopper.so` in a
# worktree of it), build/s56m.tar.xz (the same with --define FA3NN_BWD_LSE_AHEAD=3) and build/s55p.tar.xz (main's
# backward).
# Predicted: +1-3% at d128 from 2k (the two consumer warpgroups hide part of one's stall under the other's GEMMs:
# tensor pipe 62% busy in s56c), d64 / d256 +0-2%; 3 ahead within 1% of 8.
# 1. The backward's tests on s56l. 2. bwd_build_ab.py s56l x s56m x main, d128 / d64 / d256, 512-16k, causal and
# not. 3. Nsight Compute of s56l's d128 kernel at s56c's shape (does the FFMA stall move to the DEPBAR?).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_unpack s56m s55p
gpu_start /tmp/fa3nn-s57a s56l
gpu_tests tests_bwd.log 170 tests/test_hopper_bwd.py
stamp "bwd tests"
timeout 220 python3 scripts/bwd_build_ab.py --headdims 128 64 256 --seqlens 512 2048 8192 16384 --rounds 5 \
    --compare ahead3=build/s56m/libfa3nn_hopper.so main=build/s55p/libfa3nn_hopper.so --json "$out/lse_ab.json" \
    > "$out/lse_ab.log" 2>&1
echo "ab rc $?"; grep -E "^\|" "$out/lse_ab.log"; tail -n 3 "$out/lse_ab.log"
stamp ab
timeout 60 ncu --clock-control none --set full --import-source no -k "regex:flash_bwd_kernel" --launch-skip 2 \
    --launch-count 1 -f -o "$out/ncu_bwd" python3 scripts/hopper_profile_case.py --kernel bwd --headdim 128 \
    --seqlen 8192 > "$out/ncu_bwd.log" 2>&1
echo "ncu rc $?"
gpu_ncu_pages ncu_bwd
python3 scripts/ncu_sass_summary.py "$out/ncu_bwd.sass.csv" > "$out/ncu_bwd.summary.txt" 2>&1
sed -n '/^top stalled/,$p' "$out/ncu_bwd.summary.txt" | head -n 12
rm -f "$out/ncu_bwd.ncu-rep" "$out/ncu_bwd.raw.txt"
gzip "$out/ncu_bwd.sass.csv"
stamp ncu
