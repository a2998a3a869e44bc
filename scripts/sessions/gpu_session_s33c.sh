#!/usr/bin/env bash
# Planned for the third GPU call after the thirty-second session: the softcap backward on packed sequences (branch
# bwd-softcap), native against the Triton varlen backward on the same calls, cap 30, without and with the causal
# window (1024, 0), 16384 packed tokens (lengths all 2048, and mixed in [256, 4096]). Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s33c
stamp start
for window in "" "--window 1024"; do
    name=varlen_softcap${window:+_w1024}
    # shellcheck disable=SC2086
    timeout 200 python scripts/bwd_varlen_ab.py --headdims 64 128 256 --varlen-cases 2048 mixed --softcap 30 $window \
        --json "$out/$name.json" > "$out/$name.log" 2>&1
    echo "$name rc $?"; sed -n '/^| d | lengths/,$p' "$out/$name.log"; grep -E "Error" "$out/$name.log" | head -n 3
    stamp "$name"
done
