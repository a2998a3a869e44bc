#!/usr/bin/env bash
# Owed from the forty-eighth session (its s48d ran only the restore tests, one step timing and the profile): on main's
# final code, every GPU test (none ran on the whole suite after s48a), fp8_train_step (2k / 8k) and the host profile, now with eager FP8 calls off the
# custom-op dispatcher (attention_call_fp8: predicted -0.1..-0.3 ms of host time per FP8 step; s48d issued one in
# 1.76 ms for "inputs", 2.13 for "quantized", bf16 0.71). Library build/final47/ (main's kernels, C ABI 7: no kernel
# changed since) in build/s47d.tar.xz.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s48c s47d.tar.xz
export FA3NN_HOPPER_LIB=$PWD/build/final47/libfa3nn_hopper.so
stamp start
cat "$out/gpu_state.txt"
gpu_pytest tests_all.log 320 tests/
gpu_log_summary "$out/tests_all.log"
stamp tests
timeout 70 python3 scripts/fp8_train_step.py --headdims 128 --seqlens 2048 8192 --reps 3 --json "$out/fp8_step.json" \
    > "$out/fp8_step.log" 2>&1
echo "fp8 step rc $?"; grep -E "^\| [0-9]" "$out/fp8_step.log"
stamp "fp8 step"
timeout 60 python3 scripts/fp8_host_profile.py --seqlen 2048 --iters 30 --top 30 > "$out/host_profile.log" 2>&1
echo "profile rc $?"; grep -A31 "^=== " "$out/host_profile.log" | cut -c1-150
stamp profile
gpu_archive s48c.tgz
