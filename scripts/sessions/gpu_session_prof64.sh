#!/usr/bin/env bash
# 2026-12-01 fifth session: where the d64 forward's time goes, for the next session. ncu (--set full, SASS source
# page with stall sampling, clocks left alone) of our forward at d64 512 causal (0.86x cuDNN; ncu put it at 1.11x
# cuDNN's instructions, 1.18x its time) and d64 16384 non-causal (1.17x cuDNN against issue 4's 1.20), each summarized
# by scripts/ncu_sass_summary.py (opcode mix, stall reasons, most stalled instructions). Carry build/libfa3nn_hopper.so.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-prof64
for case in "512 --causal" "16384"; do
    set -- $case
    name="d64_$1${2:+_causal}"
    stamp "$name"
    timeout 90 ncu --clock-control none --set full --import-source no -k regex:flash_fwd_kernel --launch-skip 2 \
        --launch-count 1 -f -o "$out/$name" python3 scripts/hopper_profile_case.py --calls 3 --kernel fwd --headdim 64 \
        --seqlen "$1" ${2:-} > "$out/$name.ncu.log" 2>&1
    echo "ncu rc $?"
    ncu -i "$out/$name.ncu-rep" --page details > "$out/$name.details.txt" 2>&1
    ncu -i "$out/$name.ncu-rep" --page source --csv --print-source sass > "$out/$name.sass.csv" 2>&1
    python3 scripts/ncu_sass_summary.py "$out/$name.sass.csv" > "$out/$name.sass_summary.txt" 2>&1
    rm -f "$out/$name.ncu-rep" "$out/$name.sass.csv"
    grep -E "^ +(Duration|Executed Instructions  |Issue Slots Busy)" "$out/$name.details.txt" | awk '{$1=$1};1' | paste -sd';'
    head -n 40 "$out/$name.sass_summary.txt" | cut -c1-160
done
gpu_archive prof64.tgz
stamp done
