#!/usr/bin/env bash
# 2026-12-01 (third session): where the 192-key FP8 d128 loop's skeleton loses its clocks. (1) the microbenchmark
# (build/fp8_chain from benchmarks/micro/fp8_chain.cu, carried) with the skeleton mode: the real kernel's
# kSkipSoftmax work (scores scaled, O rescaled by a V ratio) between the waits; (2) ncu of the real kernel's variant
# 18 (no softmax, no K/V loads: share 0.629 of peak per clock against the microbenchmark's 1.0 without that work),
# and of the default, details + SASS source pages for scripts/ncu_sass_summary.py. Carry build/libfa3nn_hopper.so
# and build/fp8_chain.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-skeleton
stamp micro
build/fp8_chain 20000 > "$out/fp8_chain.jsonl" 2>&1
echo "micro rc $?"; grep -E "skeleton|2wg_pingpong_qk_pv\"" "$out/fp8_chain.jsonl"
stamp ncu
gpu_ncu_fp8 skeleton key_block_192_skip_softmax_and_kv_loads 150
gpu_ncu_fp8 default full 150
stamp done
gpu_archive skeleton.tgz
