#!/usr/bin/env bash
# One FP8 kernel variant study in one device call: the GPU tests matching a -k filter, then kernel-only timing of
# the default against the named variants at one head dim (scripts/bench_hopper_fp8.py, seqlen 1k-16k, causal and
# not). Carry build/libfa3nn_hopper.so.
#   bash scripts/sessions/gpu_session_fp8variants.sh HEADDIM BLOCK_K TEST_FILTER VARIANT...
#   e.g. bash scripts/sessions/gpu_session_fp8variants.sh 64 128 three_consumers three_consumers   (2026-12-02)
set -u
headdim=$1 block_k=$2 filter=$3
shift 3
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-fp8variants
stamp tests
gpu_pytest tests.log 150 tests/test_hopper_fp8.py -k "$filter"
grep -E "^(FAILED|ERROR)" "$out/tests.log" | head -n 12
stamp bench
timeout 240 python3 scripts/bench_hopper_fp8.py --json "$out/fp8_d$headdim.json" --headdims "$headdim" \
    --seqlens 1024 2048 4096 8192 16384 --reps 8 --iters 10 --block-k "$block_k" --variants "$@" \
    > "$out/fp8_d$headdim.log" 2>&1
echo "bench rc $?"; sed -n '/^| hdim/,$p' "$out/fp8_d$headdim.log"
stamp done
