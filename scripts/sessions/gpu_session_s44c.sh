#!/usr/bin/env bash
# Forty-fourth session, third call: this checkout's library (build/s44c/, carried as build/s44c.tar.xz), where the
# backward's auto schedule runs d256 one CTA per tile at every length (use_persistent_bwd; s44b: persistent
# 0.702-0.996x per tile on the H100). 1. the rotated-infinity quantization test (corrected after s44b) and the d256
# backward tests; 2. bench.py rows at d256 and d64 (forward and backward, cuDNN and FA2 beside) for the record.
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
gpu_archive s44c.tgz
