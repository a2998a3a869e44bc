#!/usr/bin/env bash
# Nsight Compute profiles (full section set, clocks left alone) of the native kernels whose rates miss their
# targets: the bf16 forward and the FP8 forward at d128 16k non-causal, the FP8 forward at d256, the bf16 backward
# at d64 (llama-1b's head dim) and d128. Per kernel: the details page (speed of light, pipe utilization, warp stall
# reasons, scheduler statistics) as text and the SASS source page (per-instruction stall samples) as CSV, all in
# one archive under $OUT (the .ncu-rep files stay there too). Summaries: scripts/ncu_sass_summary.py.
#
#   bash scripts/gpu_profile.sh [PER_CASE_S]
set -u
per_case_s=${1:-90}
source "$(dirname "$0")/gpu_env.sh"
gpu_setup /tmp/fa3nn-profile

profile() {  # NAME KERNEL_REGEX ARGS...
    local name=$1 regex=$2; shift 2
    timeout "$per_case_s" ncu --clock-control none --set full --import-source no -k "regex:$regex" \
        --launch-skip 2 --launch-count 1 -f -o "$out/$name" python3 scripts/hopper_profile_case.py "$@" \
        > "$out/$name.ncu.log" 2>&1
    echo "$name rc $?"
    ncu -i "$out/$name.ncu-rep" --page details > "$out/$name.details.txt" 2>&1
    ncu -i "$out/$name.ncu-rep" --page source --csv --print-source sass > "$out/$name.sass.csv" 2>&1
    grep -E "Duration|SM Frequency|Compute \(SM\) Throughput|Issue Slots Busy|Executed Ipc A|No Eligible" \
        "$out/$name.details.txt" | head -n 8
}
profile fwd_d128 flash_fwd_kernel --kernel fwd --headdim 128
profile fp8_d128 flash_fwd_fp8_kernel --kernel fp8 --headdim 128
profile fp8_d256 flash_fwd_fp8_kernel --kernel fp8 --headdim 256
profile bwd_d64 flash_bwd_kernel --kernel bwd --headdim 64 --seqlen 8192
profile bwd_d128 flash_bwd_kernel --kernel bwd --headdim 128 --seqlen 8192
gpu_archive profile.tgz
