#!/usr/bin/env bash
# 2026-12-01 (third session): the short-call tile thresholds (kernels/hopper/flash_fwd_launch.cuh ShortCallSeqlen)
# re-measured on the final kernels: the default, tiles_a (variant 4: d64 128x128 2 consumers, d128 128x128, d256
# 128x64) and tiles_b (variant 5: d64 192x128 3 stages, d128 128x160 2 Q stages) against cuDNN at seqlen 512, 1024,
# 2048, causal and not. The integrated bench of 11:05 UTC (results/final-h200-20261201/) has d128 1024 non-causal at
# 0.88x cuDNN with the 176-wide default while 512 (128x128) reads 0.98x. Carry build/libfa3nn_hopper.so.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-shorttiles
stamp bench
timeout 300 python3 scripts/bench_hopper.py --json "$out/shorttiles.json" --headdims 128 --seqlens 1024 \
    --ablation-seqlens --experiment-seqlens 512 1024 2048 --experiment-headdims 64 128 256 --reps 7 \
    > "$out/shorttiles.log" 2>&1
echo "bench rc $?"; tail -n 45 "$out/shorttiles.log"
stamp done
