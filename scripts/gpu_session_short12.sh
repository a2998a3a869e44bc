#!/usr/bin/env bash
# 2026-12-02 (twelfth session): the rows issue 3 still misses, swept (fa3nn.backends.triton.tune, whole backward,
# the library's orientation choice): d64 512 causal (1.19x FA2) dK/dV and dQ tiles, d128 512 causal (0.94x FA2) dK/dV
# and dQ tiles, d128 16384 non-causal (0.66x cuDNN) dK/dV tiles.
set -u
source "$(dirname "$0")/gpu_env.sh"
gpu_setup /tmp/fa3nn-short12
sweep() {  # HEADDIM SEQLEN CAUSAL STEM KINDS...
    local hd=$1 seqlen=$2 causal=$3 stem=$4
    shift 4
    timeout 120 python3 -m fa3nn.backends.triton.tune --headdim "$hd" --seqlen "$seqlen" --causal "$causal" \
        --kinds "$@" --workers 16 --json "$out/$stem.json" > "$out/$stem.log" 2>&1
    echo "$stem rc $?"; grep -E "TFLOP" "$out/$stem.log" | sed 's/ TFLOP\/s//; s/ tma=0//; s/causal=/c/' | paste -sd' ' \
        | fold -w 240
}
stamp d64; sweep 64 512 yes d64c512 dkdv dq
stamp d128; sweep 128 512 yes d128c512 dkdv dq
stamp d128nc; sweep 128 16384 no d128nc16k dkdv
stamp done
gpu_archive short12.tar.gz
