#!/usr/bin/env bash
# Forty-fourth session, third call: this checkout's library (build/s44c/, carried as build/s44c.tar.xz), where the
# backward's auto schedule runs d256 one CTA per tile at every length (use_persistent_bwd; s44b: persistent
# 0.702-0.996x per tile on the H100). 1. the rotated-infinity quantization test (corrected after s44b) and the d256
# backward tests; 2. bench.py rows at d256 and d64 (forward and backward, cuDNN and FA2 beside) for the record;
# 3. d64's backward schedules (its persistent rule is s27d / s28a's, H200, on the kernels of then).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s44c s44c.tar.xz
export FA3NN_HOPPER_LIB=$PWD/build/s44c/libfa3nn_hopper.so
stamp start
gpu_pytest tests_inf.log 60 tests/test_fp8_triton_gpu.py -k infinities
gpu_pytest tests_d256.log 150 tests/test_hopper_bwd.py tests/test_hopper.py -k "256 and not 192"
gpu_log_summary "$out/tests_d256.log"
stamp tests
timeout 200 python3 scripts/bench.py --backends hopper cudnn fa2 --headdims 256 64 --directions fwd bwd \
    --seqlens 512 2048 8192 16384 --rounds 2 --out-dir "$out" --tag d256_d64 > "$out/bench.log" 2>&1
echo "bench rc $?"; grep -E "^\| (256|64) " "$out/d256_d64.md"
stamp bench
timeout 90 python3 scripts/bwd_schedule_ab.py --headdims 64 --seqlens 512 1024 2048 4096 8192 --rounds 3 \
    --json "$out/schedule64.json" > "$out/schedule64.log" 2>&1
echo "schedule rc $?"; grep -E "^\| |main kernel" "$out/schedule64.log"
stamp schedule
gpu_archive s44c.tgz
