#!/usr/bin/env bash
# 2026-12-04 (thirtieth session, second call): where the d256 native backward's time goes. Timing-only builds of
# flash_bwd_cols.cuh (carried as build/abl.tar.xz; patch in the results folder): 1 = no dQ reduction (red.global),
# 3 = neither the dQ GEMM nor its reduction, 4 = no S^T / dP^T GEMMs, 8 = no P^T / dS^T shared-memory writes and
# barrier; each against this build, whole backward, rounds interleaved. Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s30b
mkdir -p /tmp/abl && tar xJf build/abl.tar.xz -C /tmp/abl
stamp ablations
timeout 200 python scripts/bwd_build_ab.py --headdims 256 --seqlens 512 2048 8192 --rounds 3 \
    --compare nored=/tmp/abl/abl1.so nodq=/tmp/abl/abl3.so noscores=/tmp/abl/abl4.so nosmem=/tmp/abl/abl8.so \
    --json "$out/ablate.json" > "$out/ablate.log" 2>&1
echo "ablate rc $?"; sed -n '/^| d /,$p' "$out/ablate.log"
stamp done
