#!/usr/bin/env bash
# Forty-fifth session: why the varlen backward trails the dense one on uniform lengths (s45e, H100, d128 512: main
# kernel 387.7 against 369.7 us non-causal, 331.3 against 301.9 causal; pre / postprocess +7 us each). ncu --set full
# (clocks left alone) of flash_bwd_kernel, dense and varlen (hopper_profile_case.py --varlen: the same batch as
# uniform packed sequences), details pages. Library: build/fin45/ (main's kernels), carried as build/s45c.tar.xz.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s45f s45c.tar.xz
export FA3NN_HOPPER_LIB=$PWD/build/fin45/libfa3nn_hopper.so
stamp start
profile() {  # NAME ARGS...
    local name=$1; shift
    timeout 90 ncu --clock-control none --set full --import-source no -k "regex:flash_bwd_kernel" --launch-skip 2 \
        --launch-count 1 -f -o "$out/$name" python3 scripts/hopper_profile_case.py --kernel bwd --calls 3 "$@" \
        > "$out/$name.ncu.log" 2>&1
    echo "$name rc $?"
    ncu -i "$out/$name.ncu-rep" --page details > "$out/$name.details.txt" 2>&1
    grep -E "^ +(Duration|Executed Instructions  |Issue Slots Busy|DRAM Throughput|L2 Hit Rate|Achieved Occupancy)" \
        "$out/$name.details.txt" | awk '{$1=$1};1' | paste -sd';' | cut -c1-300
    rm -f "$out/$name.ncu-rep"
}
for c in "" "--causal"; do
    profile "dense${c:+_causal}" --headdim 128 --seqlen 512 $c
    profile "varlen${c:+_causal}" --headdim 128 --seqlen 512 --varlen $c
done
stamp profiles
gpu_archive s45f.tgz
