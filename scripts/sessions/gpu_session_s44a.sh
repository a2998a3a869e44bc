#!/usr/bin/env bash
# Forty-fourth session, first call: mla_keys with its dS^T / dQ descriptors hoisted out of the step loop again
# (branch wip/mla-keys-descs: main + that change; 0 spills, nvcc 13.0) against main's (made in the loop, 0.962x
# s43d's first build at 8k in s43f), then the whole GPU suite and the record rows owed on an H200 (s43 was H100 only).
# Built here first (no GPU needed), carried as build/s44a.tar.xz:
#   FA3NN_KERNELS_DIR=kernels/hopper python -m fa3nn.backends.hopper_build --out build/main/libfa3nn_hopper.so
#   (in a worktree of wip/mla-keys-descs) ... --out <this checkout>/build/descs/libfa3nn_hopper.so
#   tar cJf build/s44a.tar.xz --exclude='*.ptxas.log' -C build main descs
# Stages: 1. descs x main, MLA backward, 512 / 2k / 8k / 16k, 3 rounds; 2. every GPU test on descs (d64 / d128 /
# d256 units SASS-identical to main's); 3. bench.py rows: MLA backward and d128 forward / backward against cuDNN / FA2.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s44a s44a.tar.xz
export FA3NN_HOPPER_LIB=$PWD/build/descs/libfa3nn_hopper.so
stamp start
timeout 100 python3 scripts/bwd_build_ab.py --headdims 192 --headdim-v 128 --variants mla_keys \
    --compare main=build/main/libfa3nn_hopper.so@mla_keys --seqlens 512 2048 8192 16384 --rounds 3 \
    --json "$out/ab.json" > "$out/ab.log" 2>&1
echo "ab rc $?"; grep -E "^\| " "$out/ab.log"
stamp ab
gpu_pytest tests_all.log 260 tests/
gpu_log_summary "$out/tests_all.log"
stamp "all tests"
timeout 80 python3 scripts/bench.py --backends hopper cudnn --headdims 192 --headdim-v 128 --directions bwd \
    --seqlens 512 2048 8192 16384 --out-dir "$out" --tag mla_bwd > "$out/bench_mla.log" 2>&1
echo "bench mla rc $?"; grep -E "^\| 192" "$out/mla_bwd.md"
stamp "bench mla"
timeout 120 python3 scripts/bench.py --backends hopper cudnn fa2 --headdims 128 --directions fwd bwd \
    --seqlens 512 2048 8192 16384 --rounds 2 --out-dir "$out" --tag d128 > "$out/bench_d128.log" 2>&1
echo "bench d128 rc $?"; grep -E "^\| 128" "$out/d128.md"
stamp "bench d128"
gpu_archive s44a.tgz
