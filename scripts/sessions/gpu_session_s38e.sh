#!/usr/bin/env bash
# Thirty-eighth session: the native backward at multi-head latent attention's head dims (q / k 192, v 128;
# kernels/hopper/flash_bwd_mla.cuh, never run before this call; carry build/libfa3nn_hopper.so). Its GPU tests
# (test_hopper_bwd.py -k "mla or widths": every length, MHA / GQA, varlen per tile and persistent, dK / dV
# determinism, the pre / postprocess and dK / dV store widths at every head-dim pair; test_hopper.py -k mla: training
# through auto, now native both ways), then bench.py's rows (forward and backward) beside Triton and cuDNN: Triton's
# backward read 169 / 207 TFLOP/s causal at 2k / 8k in s35 (0.46x cuDNN's 355 / 451).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s38e
stamp start
gpu_pytest mla_bwd_tests.log 240 tests/test_hopper_bwd.py tests/test_hopper.py -k "mla or widths"
grep -E "^(FAILED|ERROR) " "$out/mla_bwd_tests.log" | head -n 10
stamp tests
timeout 300 python3 scripts/bench.py --backends hopper triton cudnn --headdims 192 --headdim-v 128 \
    --seqlens 512 2048 8192 16384 --out-dir "$out" --tag mla_fwdbwd --precompile 12 > "$out/bench_mla.log" 2>&1
echo "bench rc $?"; grep -E "^\| " "$out/mla_fwdbwd.md" | head -n 20
stamp bench
