#!/usr/bin/env bash
# 2026-12-02 (fifteenth session): where the d256 backward's time goes (0.92-1.13x FA2 in final15): each kernel alone
# (one stream), the output split's dV / dK kernels apart, beside cuDNN, at 512 / 2k / 8k.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-bd256
stamp breakdown
FA3NN_TRITON_BWD_STREAMS=0 timeout 200 python3 scripts/bwd_breakdown.py --headdims 256 --seqlens 512 2048 8192 \
    --json "$out/bd256.json" > "$out/bd256.log" 2>&1
echo "bd256 rc $?"; grep -E "^\| (triton|cudnn)" "$out/bd256.log"
stamp done
gpu_archive bd256.tar.gz
