#!/usr/bin/env bash
# Forty-eighth session, third call: where the FP8 training step's host time goes (s48b: the host issued one step in
# 0.79 ms for bf16, 1.76 / 2.61 ms for fp8 "inputs" / "quantized", against 1.7-1.9 ms of kernels: host-bound).
# cProfile of the three variants at d128, 2k (scripts/fp8_host_profile.py). Library build/final47/ in s47d.tar.xz.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s48c s47d.tar.xz
export FA3NN_HOPPER_LIB=$PWD/build/final47/libfa3nn_hopper.so
stamp start
timeout 120 python3 scripts/fp8_host_profile.py --seqlen 2048 --iters 40 --top 30 > "$out/host_profile.log" 2>&1
echo "profile rc $?"; grep -A31 "^=== " "$out/host_profile.log" | cut -c1-160
stamp profile
gpu_archive s48c.tgz
