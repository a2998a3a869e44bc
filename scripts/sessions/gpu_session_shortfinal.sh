#!/usr/bin/env bash
# 2026-12-01 fifth session: (1) the native forward and FP8 GPU suites on the one-pair causal deal as the default;
# (2) the integrated bench (hopper / triton / cuDNN / FA2, forward and backward, every FA3 shape) from the final code;
# (3) why the short rows miss issue 4's 0.95x: ncu (--set full, clocks left alone) of our forward and cuDNN's at
# d256 512 non-causal / causal and d64 512 causal, details pages only. Carry build/libfa3nn_hopper.so.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-shortfinal
stamp tests
gpu_pytest tests_hopper.log 200 tests/test_hopper.py tests/test_hopper_fp8.py
for hdims in "128" "64 256"; do
    tag="final-d${hdims// /-d}"
    stamp "bench d$hdims"
    timeout 240 python3 scripts/bench.py --backends hopper triton cudnn fa2 --headdims $hdims --precompile 12 \
        --out-dir "$out" --tag "$tag" > "$out/$tag.log" 2>&1
    echo "bench rc $?"; grep -E "^\| (64|128|256) " "$out/$tag.md" | cut -d'|' -f2-4,17,18,21-24
done
profile() {  # NAME KERNEL_REGEX ARGS...
    local name=$1 regex=$2; shift 2
    timeout 60 ncu --clock-control none --set full --import-source no -k "regex:$regex" --launch-skip 2 \
        --launch-count 1 -f -o "$out/$name" python3 scripts/hopper_profile_case.py --calls 3 "$@" > "$out/$name.ncu.log" 2>&1
    echo "$name rc $? $(grep -o 'Profiling "[^"]*' "$out/$name.ncu.log" | head -n 1 | cut -c1-90)"
    ncu -i "$out/$name.ncu-rep" --page details > "$out/$name.details.txt" 2>&1
    grep -E "^ +(Duration|SM Frequency|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|Issue Slots Busy|Registers Per|Achieved Occupancy|Executed Instructions  )" \
        "$out/$name.details.txt" | awk '{$1=$1};1' | paste -sd';' | cut -c1-400
    rm -f "$out/$name.ncu-rep"
}
stamp profiles
for case in "256 512" "256 512 --causal" "64 512 --causal" "128 512 --causal"; do
    set -- $case
    tag="d$1_$2${3:+_causal}"
    profile "ours_$tag" flash_fwd_kernel --kernel fwd --headdim "$1" --seqlen "$2" ${3:-}
    profile "cudnn_$tag" "cudnn|sdpa|fprop|fmha" --kernel cudnn --headdim "$1" --seqlen "$2" ${3:-}
done
gpu_archive shortfinal.tgz
stamp done
