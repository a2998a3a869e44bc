#!/usr/bin/env bash
# Prepared at the end of the thirty-eighth session (NOTES "Next" 1 and 2). Carry build/libfa3nn_hopper.so and
# build/trace/libfa3nn_hopper.so, both built from this checkout:
#   FA3NN_KERNELS_DIR=kernels/hopper python -m fa3nn.backends.hopper_build --out build/libfa3nn_hopper.so
#   FA3NN_KERNELS_DIR=kernels/hopper python -m fa3nn.backends.hopper_build --define FA3NN_BWD_TRACE \
#       --out build/trace/libfa3nn_hopper.so
# 1. Where a tile's time goes in the MLA backward (scripts/bwd_trace.py: per-step time, the first stage, the epilogue;
#    persistent launches, which the trace needs to see several tiles per CTA) beside d256's column split (the same
#    64-key blocks, 0.97-1.14x cuDNN on the H200): the MLA kernel ran ~2.4 us per step against ~0.9 us of wgmma (H100).
# 2. The MLA forward's tiles on this card (128 x 96 short calls were chosen on the H200; on the H100 causal 512 / 2k
#    read 0.67 / 0.82x cuDNN).
# Set TEST_WORKERS=4 for any test stage added here when the device is an H100.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s39a
stamp start
for dims in "192 --headdim-v 128" "256"; do
    tag=$(echo "$dims" | tr -d ' -' | tr 'a-z' 'A-Z')
    timeout 150 python3 scripts/bwd_trace.py --trace-lib build/trace/libfa3nn_hopper.so --headdims $dims \
        --seqlens 2048 16384 --json "$out/trace_$tag.json" > "$out/trace_$tag.log" 2>&1
    echo "trace $dims rc $?"; grep -E "^\| " "$out/trace_$tag.log"
    stamp "trace $dims"
done
timeout 200 python scripts/bench_hopper.py --headdims 192 --headdim-v 128 --seqlens 512 1024 2048 4096 \
    --variants full tiles_a tiles_b --ablation-seqlens --experiment-headdims --reps 5 \
    --json "$out/mla_tiles.json" > "$out/mla_tiles.log" 2>&1
echo "tiles rc $?"; grep -E "^\| " "$out/mla_tiles.log"
stamp tiles
