#!/usr/bin/env bash
# 2026-12-01 (fourth session). (1) The FP8 warp-uniform warpgroup index (build/libfa3nn_hopper.so) against HEAD's
# build (build/base/libfa3nn_hopper.so) under sustained load (scripts/clock_probe.py --compare, each kernel 3 s,
# twice in turn): interleaved rounds put it -7.8% at d128 16k non-causal with a 2.36-2.93 ms spread and +1.6..3.5%
# elsewhere (NOTES "2026-12-01 fourth session"). (2) Native bf16 forward, d256 and d64 at 512/1024: the default tiles
# against variant 4 (tiles_a: d256 128 x 64, d64 128 x 128 with 2 consumers) beside cuDNN.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-fp8clock
for seqlen in 16384 8192 4096; do
    stamp "clock $seqlen"
    timeout 120 python3 scripts/clock_probe.py --json "$out/clock_$seqlen.json" --seqlen $seqlen --seconds 3 \
        --kernels fp8 fp8_base --fp8-variants --compare base=build/base/libfa3nn_hopper.so --repeat 2 \
        > "$out/clock_$seqlen.log" 2>&1
    echo "rc $?"; sed -n '/^| kernel/,$p' "$out/clock_$seqlen.log"; grep "p10" "$out/clock_$seqlen.log" | sed 's/.*ms per call/ms per call/'
done
stamp short tiles
timeout 200 python3 scripts/bench_hopper.py --json "$out/short.json" --headdims 256 64 --seqlens 512 1024 \
    --variants full tiles_a --ablation-seqlens > "$out/short.log" 2>&1
echo "short rc $?"; sed -n '/^| hdim/,$p' "$out/short.log"
stamp done
