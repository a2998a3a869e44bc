#!/usr/bin/env bash
# 2026-12-02 (twelfth session): d256 rows issue 3 misses, swept (fa3nn.backends.triton.tune): the forward at 512 and
# 1024 causal (1.00x / 1.18x FA2), the split dK/dV kernel at 2048 (backward 0.85-0.86x FA2; its tiles were never
# swept, only compared two at a time).
set -u
source "$(dirname "$0")/gpu_env.sh"
gpu_setup /tmp/fa3nn-d256short12
sweep() {  # HEADDIM SEQLEN CAUSAL STEM KINDS...
    local hd=$1 seqlen=$2 causal=$3 stem=$4
    shift 4
    timeout 100 python3 -m fa3nn.backends.triton.tune --headdim "$hd" --seqlen "$seqlen" --causal "$causal" \
        --kinds "$@" --tma auto --workers 16 --json "$out/$stem.json" > "$out/$stem.log" 2>&1
    echo "$stem rc $?"; grep -E "TFLOP" "$out/$stem.log" | sed 's/ TFLOP\/s//; s/ tma=[a-z0-9]*//; s/causal=/c/' \
        | paste -sd' ' | fold -w 240
}
stamp fwd512; sweep 256 512 yes fwd256c512 fwd
stamp fwd1024; sweep 256 1024 yes fwd256c1024 fwd
stamp split2048; sweep 256 2048 both split256_2048 dkdv_split
stamp done
gpu_archive d256short12.tar.gz
