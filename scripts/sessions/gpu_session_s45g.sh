#!/usr/bin/env bash
# Forty-fifth session: s45f found the causal varlen backward 8.4% longer than the dense one on the same uniform batch
# (d128 512, H100) with 2.6% more instructions. ncu's SASS source page (stall samples per instruction) of both, for
# scripts/ncu_sass_summary.py and an offline diff of where the extra samples sit. Library build/fin45/ (main's
# kernels), carried as build/s45c.tar.xz.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s45g s45c.tar.xz
export FA3NN_HOPPER_LIB=$PWD/build/fin45/libfa3nn_hopper.so
stamp start
for name in dense_causal varlen_causal; do
    extra=""; [ "$name" = varlen_causal ] && extra="--varlen"
    timeout 90 ncu --clock-control none --set full --import-source no -k "regex:flash_bwd_kernel" --launch-skip 2 \
        --launch-count 1 -f -o "$out/$name" python3 scripts/hopper_profile_case.py --kernel bwd --calls 3 \
        --headdim 128 --seqlen 512 --causal $extra > "$out/$name.ncu.log" 2>&1
    echo "$name rc $?"
    ncu -i "$out/$name.ncu-rep" --page source --csv --print-source sass > "$out/$name.sass.csv" 2>&1
    python3 scripts/ncu_sass_summary.py "$out/$name.sass.csv" > "$out/$name.sass_summary.txt" 2>&1
    gzip "$out/$name.sass.csv"
    rm -f "$out/$name.ncu-rep"
    head -n 30 "$out/$name.sass_summary.txt" | cut -c1-150
done
stamp profiles
gpu_archive s45g.tgz
