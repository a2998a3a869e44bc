#!/usr/bin/env bash
# GPU calls of the thirty-seventh session. Carry build/libfa3nn_hopper.so (this checkout's kernels: sinks in the
# forward's epilogue, C ABI 3), build_old/libfa3nn_hopper.so (c9b703f's kernels, ABI 2, for the old trees), base36/ =
# 1ff9d18's fa3nn and prev36/ = c9b703f's.
#   stage "sinks": the GPU tests of the fused sinks, the HF mask paths (the broadcast evaluation on CUDA) and the FA3
#     conventions; then scripts/fa3_compat_bench.py on HEAD (sinks in the kernel) and on prev36 (the one-pass Python
#     correction: s36a measured 1.35 / 1.44x the plain causal forward at 4k d64 / d128, 1.10x at 16k; predicted now
#     <= 1.03x forward, <= 1.05x forward + backward (the backward keeps one pass over dout and out for D)), HEAD twice.
#   stage "hf": the packed HF training step (scripts/hf_varlen_step_ab.py, 8 layers, 8 x 2048 packed into one row)
#     before the mask reading (base36: 75.0 ms in s36a), with the thirty-sixth session's ~250-op reading (prev36:
#     predicted ~80 ms, never measured) and with transformers 5's index-based mask functions evaluated by one
#     broadcast call instead of vmap (HEAD: predicted 76-77 ms; CPU host time of the layout 1.97 -> 0.26 ms); HEAD
#     twice, interleaved by process.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s37a
new_lib=$FA3NN_HOPPER_LIB
old_lib=$PWD/build_old/libfa3nn_hopper.so
tree() {  # tree NAME -> the PYTHONPATH and library of that tree
    case $1 in head* | lean* | nosync*) echo "$PWD $new_lib" ;; *) echo "$PWD/$1 $old_lib" ;; esac
}
stamp start
case ${1:-sinks} in
sinks)
    gpu_pytest sinks_tests.log 200 tests/test_hopper.py -k "sinks" tests/test_fa3_compat.py tests/test_hf.py \
        tests/test_hf_mask_probe.py
    grep -E "^(FAILED|ERROR) " "$out/sinks_tests.log" | head -n 10
    stamp tests
    for run in head1 prev36 head2; do
        read -r path lib <<< "$(tree $run)"
        PYTHONPATH=$path:$PYTHONPATH FA3NN_HOPPER_LIB=$lib timeout 150 python scripts/fa3_compat_bench.py \
            --json "$out/fa3_compat_$run.json" > "$out/fa3_compat_$run.log" 2>&1
        echo "$run rc $?"; tail -n 5 "$out/fa3_compat_$run.log"
        stamp "$run"
    done ;;
cost)  # after the first two stages: the sinks tests again (the kernel's exact lse for keyless rows), then where the
       # mask reading's time goes (scripts/hf_mask_cost.py; HEAD's packed step was 88.0-88.7 ms against 82.6 before
       # the reading on the H100)
    gpu_pytest sinks_tests2.log 200 tests/test_hopper.py tests/test_fa3_compat.py -k "sinks"
    grep -E "^(FAILED|ERROR) " "$out/sinks_tests2.log" | head -n 10
    stamp tests
    timeout 200 python scripts/hf_mask_cost.py --json "$out/hf_mask_cost.json" > "$out/hf_mask_cost.log" 2>&1
    echo "cost rc $?"; tail -n 8 "$out/hf_mask_cost.log"
    stamp cost
    for run in lean1 base36 lean2; do  # the leaner reading (~130 ops instead of ~257) against before the reading
        read -r path lib <<< "$(tree $run)"
        PYTHONPATH=$path:$PYTHONPATH FA3NN_HOPPER_LIB=$lib timeout 150 python scripts/hf_varlen_step_ab.py \
            --rounds 5 --json "$out/hf_step_$run.json" > "$out/hf_step_$run.log" 2>&1
        echo "$run rc $?"; grep -E "packed" "$out/hf_step_$run.log"
        stamp "$run"
    done ;;
sinks2)  # the sinks' gradient from the native backward's workspaces (its GPU tests, then fa3_compat_bench against
         # prev36: s37a's fwd + bwd with sinks 1.02-1.12x causal, 1.21-1.31x window 128; predicted <= 1.03x both) and
         # the leaner mask reading's GPU tests
    gpu_pytest sinks_tests3.log 200 tests/test_hopper.py tests/test_fa3_compat.py tests/test_hf.py \
        tests/test_hf_mask_probe.py -k "sinks or hf or layout or packing or mask"
    grep -E "^(FAILED|ERROR) " "$out/sinks_tests3.log" | head -n 10
    stamp tests
    for run in head1 prev36; do
        read -r path lib <<< "$(tree $run)"
        PYTHONPATH=$path:$PYTHONPATH FA3NN_HOPPER_LIB=$lib timeout 150 python scripts/fa3_compat_bench.py \
            --json "$out/fa3_compat2_$run.json" > "$out/fa3_compat2_$run.log" 2>&1
        echo "$run rc $?"; tail -n 5 "$out/fa3_compat2_$run.log"
        stamp "$run"
    done ;;
all)  # the session's final code: every GPU test (the sinks-gradient test fixed to compare float32 products)
    gpu_all_tests 300 60
    stamp all ;;
nosync)  # the reading without its four blocking host-to-device copies (torch.tensor(..., device=cuda) synchronizes):
         # the packed calls only, HEAD against base36 on the same machine (s37b, H200: 78.5-79.0 against 75.4)
    for run in nosync1 base36 nosync2; do
        read -r path lib <<< "$(tree $run)"
        PYTHONPATH=$path:$PYTHONPATH FA3NN_HOPPER_LIB=$lib timeout 100 python scripts/hf_varlen_step_ab.py \
            --rounds 5 --calls sdpa fa3nn_packed_position_ids fa3nn_packed_cu_seqlens \
            --json "$out/hf_step_$run.json" > "$out/hf_step_$run.log" 2>&1
        echo "$run rc $?"; grep -E "packed|^\| sdpa " "$out/hf_step_$run.log"
        stamp "$run"
    done
    timeout 60 python scripts/hf_mask_cost.py --forwards 6 --json "$out/hf_mask_cost.json" > "$out/hf_mask_cost.log" 2>&1
    echo "cost rc $?"; tail -n 6 "$out/hf_mask_cost.log" ;;
hf)
    for run in head1 base36 prev36 head2; do
        read -r path lib <<< "$(tree $run)"
        PYTHONPATH=$path:$PYTHONPATH FA3NN_HOPPER_LIB=$lib timeout 200 python scripts/hf_varlen_step_ab.py \
            --rounds 5 --json "$out/hf_step_$run.json" > "$out/hf_step_$run.log" 2>&1
        echo "$run rc $?"; grep -E "packed|^\| sdpa " "$out/hf_step_$run.log"
        stamp "$run"
    done ;;
esac
