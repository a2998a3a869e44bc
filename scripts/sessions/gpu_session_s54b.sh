#!/usr/bin/env bash
# s54b: the backward's staggered query walk (measurement define FA3NN_BWD_STAGGER, branch wip/bwd-stagger; NOTES
# "fifty-fourth session"). Without a causal mask every tile of a head walks its query blocks from the first, so at
# 16k the ~128 CTAs in flight on one head read the same Q / dO rows and reduce-add into the same dq_accum rows in
# lockstep; staggered, each tile starts at its own diagonal and wraps. Carry build/s52p.tar.xz (main's kernels) and
# build/s54s.tar.xz (the define on: `python -m fa3nn.backends.hopper_build --define FA3NN_BWD_STAGGER --out
# build/s54s/libfa3nn_hopper.so` in a worktree of the branch, then `tar cJf build/s54s.tar.xz -C build
# s54s/libfa3nn_hopper.so`). Predicted, if the lockstep is what drops d128 non-causal from 8k to 16k (H200 s45h: 580
# -> 561 TFLOP/s while FlashAttention-3's rises 607 -> 621): non-causal +3-8% at 16k, +1-4% at 8k, ~0 at 512 / 2k;
# causal rows unchanged (their kernels are compiled as main's: the control). A loss would say the L2 cannot hold a
# head's Q / dO and dq_accum rows for a staggered walk.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_start /tmp/fa3nn-s54b s52p
python3 -c "import tarfile; tarfile.open('build/s54s.tar.xz').extractall('build')"
main_lib=$FA3NN_HOPPER_LIB
export FA3NN_HOPPER_LIB=$PWD/build/s54s/libfa3nn_hopper.so
gpu_tests tests_bwd_stagger.log 120 tests/test_hopper_bwd.py
stamp "bwd tests on the stagger build"
export FA3NN_HOPPER_LIB=$main_lib
timeout 300 python3 scripts/bwd_build_ab.py --compare stagger=build/s54s/libfa3nn_hopper.so --headdims 128 64 256 \
    --seqlens 16384 8192 2048 512 --rounds 5 --json "$out/ab.json" > "$out/ab.log" 2>&1
echo "ab rc $?"; grep -E "^\||main kernel" "$out/ab.log" | tail -n 40
stamp ab
