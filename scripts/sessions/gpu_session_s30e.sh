#!/usr/bin/env bash
# 2026-12-04 (thirtieth session, fifth call): what in the d256 bulk dQ path costs (s30d: without staging and
# reduce-adds 1.44-1.72x). Timing-only builds (build/abl3.tar.xz, patch in the results folder): 16 = no staging, no
# reduce-adds; 64 = staging but no reduce-adds (the L2 side removed); 128 = the stage freed before the reduce-adds
# have read it (racy: the ring's hold removed). Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s30e
mkdir -p /tmp/abl && tar xJf build/abl3.tar.xz -C /tmp/abl
stamp ablations
timeout 150 python scripts/bwd_build_ab.py --headdims 256 --seqlens 512 2048 8192 --rounds 3 \
    --compare nodq=/tmp/abl/abl16.so noreduce=/tmp/abl/abl64.so earlyfree=/tmp/abl/abl128.so \
    --json "$out/ablate.json" > "$out/ablate.log" 2>&1
echo "ablate rc $?"; sed -n '/^| d /,$p' "$out/ablate.log"
stamp done
