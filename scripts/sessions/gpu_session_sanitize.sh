#!/usr/bin/env bash
# Prepared 2026-12-01 (fifth session), not yet run: compute-sanitizer on the forward paths that changed since the
# last clean run (memcheck and racecheck, one d64 causal GQA varlen case, 2026-11-30): the d256 short tiles (128 x
# 48, Q double-buffered, TMA-store epilogue, dense), d128 short causal (128 x 128, Q2, TMA store), the d256 default
# (128 x 80, one Q stage, direct stores), all on the one-pair causal deal and the lazy O rescale; memcheck, racecheck
# (shared-memory hazards) and synccheck (barrier misuse) each. Carry build/libfa3nn_hopper.so.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-sanitize
cases=("" "--dense --headdim 256 --seqlen 300" "--dense --headdim 256 --seqlen 300 --non-causal"
       "--dense --headdim 128 --seqlen 400" "--dense --headdim 256 --seqlen 1100 --batch 1")
for tool in memcheck racecheck synccheck; do
    for case in "${cases[@]}"; do
        stamp "$tool $case"
        timeout 240 compute-sanitizer --tool "$tool" --error-exitcode 9 python3 scripts/hopper_small_case.py $case \
            > "$out/log.txt" 2>&1
        echo "rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|ok$' "$out/log.txt" | paste -sd' ' | cut -c1-200)"
        cat "$out/log.txt" >> "$out/sanitize_$tool.log"
    done
done
rm -f "$out/log.txt"
stamp done
