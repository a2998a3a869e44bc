#!/usr/bin/env bash
# 2026-12-04 (thirtieth session, fourth call): the d256 native backward with bulk dQ in the ring (the default since
# s30c). Where its time goes now (timing-only builds carried as build/abl2.tar.xz, patch in the results folder:
# 4 = no S^T / dP^T GEMMs, 8 = no P^T / dS^T stores and barrier, 16 = no dQ staging or reduce-adds, 32 = no dQ GEMM),
# per tile x persistent at the short seqlens auto runs persistent, and varlen against the Triton backward and the
# dense call. Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s30d
mkdir -p /tmp/abl && tar xJf build/abl2.tar.xz -C /tmp/abl
stamp ablations
timeout 150 python scripts/bwd_build_ab.py --headdims 256 --seqlens 512 2048 8192 --rounds 3 \
    --compare noscores=/tmp/abl/abl4.so nosmem=/tmp/abl/abl8.so nodqred=/tmp/abl/abl16.so nodqgemm=/tmp/abl/abl32.so \
    --json "$out/ablate.json" > "$out/ablate.log" 2>&1
echo "ablate rc $?"; sed -n '/^| d /,$p' "$out/ablate.log"
stamp schedules
timeout 120 python scripts/bwd_schedule_ab.py --headdims 256 --seqlens 512 1024 2048 4096 --rounds 3 \
    --json "$out/sched.json" > "$out/sched.log" 2>&1
echo "sched rc $?"; sed -n '/^| d /,$p' "$out/sched.log"
stamp varlen
timeout 150 python scripts/bwd_varlen_ab.py --headdims 256 --seqlens 2048 --varlen-cases mixed short 2048 --rounds 3 \
    --json "$out/varlen.json" > "$out/varlen.log" 2>&1
echo "varlen rc $?"; sed -n '/^| d /,$p' "$out/varlen.log"
stamp done
