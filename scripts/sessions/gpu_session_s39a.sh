#!/usr/bin/env bash
# The FA3NN_MLA_ABLATE measurement builds it names exist in commit 315d608 only (removed after).
# Prepared at the end of the thirty-eighth session (NOTES "Next" 1 and 2), extended in the thirty-ninth. Carry
# build/libs.tar.xz: this checkout's library (libfa3nn_hopper.so), the trace build (trace/) and the MLA backward's
# timing-only ablation builds (ablate1-4/, FA3NN_MLA_ABLATE: 1 no dQ staging stores, 2 no dQ reduce-adds, 3 no dQ at
# all, 4 no dK / dV GEMMs; wrong results, timing only), each built from this checkout with
#   FA3NN_KERNELS_DIR=kernels/hopper python -m fa3nn.backends.hopper_build [--define NAME] --out build/X/libfa3nn_hopper.so
# and packed with `tar cJf build/libs.tar.xz -C build libfa3nn_hopper.so trace ablate1 ...` (23 MB each, 1.5 MB xz).
# 1. Where a tile's time goes in the MLA backward (scripts/bwd_trace.py) beside d256's column split.
# 2. What the MLA backward's step spends on dQ and on the dK / dV GEMMs (the ablation builds against this one).
# 3. The MLA forward's tiles on this card (128 x 96 short calls were chosen on the H200).
set -u
python3 -c "import tarfile; tarfile.open('build/libs.tar.xz').extractall('build')"
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
timeout 240 python3 scripts/bwd_build_ab.py --headdims 192 --headdim-v 128 --seqlens 2048 8192 --rounds 5 \
    --compare a1_nostage=build/ablate1/libfa3nn_hopper.so a2_noreduce=build/ablate2/libfa3nn_hopper.so \
    a3_nodq=build/ablate3/libfa3nn_hopper.so a4_nodkdv=build/ablate4/libfa3nn_hopper.so \
    --json "$out/mla_ablate.json" > "$out/mla_ablate.log" 2>&1
echo "ablate rc $?"; grep -E "^\| |main kernel" "$out/mla_ablate.log"
stamp ablate
timeout 200 python3 scripts/bench_hopper.py --headdims 192 --headdim-v 128 --seqlens 512 1024 2048 4096 \
    --variants full tiles_a tiles_b --ablation-seqlens --experiment-headdims --reps 5 \
    --json "$out/mla_tiles.json" > "$out/mla_tiles.log" 2>&1
echo "tiles rc $?"; grep -E "^\| " "$out/mla_tiles.log"
stamp tiles
