#!/usr/bin/env bash
# 2026-12-04 (twenty-ninth session, fifth call): where varlen's 4-16% against the dense call on uniform lengths goes
# (s29d): per-kernel device times (torch.profiler) of the varlen, dense auto and dense one-CTA-per-tile calls, MHA,
# lengths 512 and 2048. Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s29e
stamp ab
timeout 200 python scripts/bwd_varlen_ab.py --rounds 5 --varlen-cases 512 2048 --profile \
    --json "$out/varlen_profile.json" > "$out/varlen_profile.log" 2>&1
echo "ab rc $?"; sed -n '/^| d /,$p' "$out/varlen_profile.log"; grep "^kernel us" "$out/varlen_profile.log"
stamp done
