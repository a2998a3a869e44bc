#!/usr/bin/env bash
# First GPU call of the thirty-seventh session (carry build/libfa3nn_hopper.so, base36/ = 1ff9d18's fa3nn, prev36/ =
# c9b703f's): the packed HF training step (scripts/hf_varlen_step_ab.py, 8 layers, 8 x 2048 packed into one row)
# before the mask reading (base36: 75.0 ms in s36a), with the thirty-sixth session's ~250-op reading (prev36:
# predicted ~80 ms, never measured) and with this session's broadcast evaluation of transformers 5's index-based mask
# functions instead of vmap (HEAD: predicted 76-77 ms, CPU host time of the layout 1.97 -> 0.26 ms); HEAD twice,
# interleaved by process. Before that, the HF GPU tests (the broadcast path on CUDA).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s37a
stamp start
gpu_pytest hf_tests.log 120 tests/test_hf.py tests/test_hf_mask_probe.py
grep -E "^(FAILED|ERROR) " "$out/hf_tests.log" | head -n 10
stamp tests
for run in head1 base36 prev36 head2; do
    case $run in head*) path=$PWD ;; *) path=$PWD/$run ;; esac
    PYTHONPATH=$path:$PYTHONPATH timeout 200 python scripts/hf_varlen_step_ab.py --rounds 5 \
        --json "$out/hf_step_$run.json" > "$out/hf_step_$run.log" 2>&1
    echo "$run rc $?"; grep -E "packed|^\| sdpa " "$out/hf_step_$run.log"
    stamp "$run"
done
