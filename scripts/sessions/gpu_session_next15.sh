#!/usr/bin/env bash
# Prepared at the end of the fourteenth session (2026-12-02; device time spent), for the next session's first
# call: FA3NN_TRITON_TMA_BATCHED, the descriptors over (batch, seqlen, heads * dim) views so that no kernel zeroes
# rows past a sequence itself (offline, Triton 3.6: d128 dK/dV causal masked loops 1395 / 1160 -> 944 / 846
# instructions, d256 causal forward 821 -> 634 and 25 -> 4 barriers, d128 dQ masked loop 616 -> 428; see
# benchmarks/NOTES.md, fourteenth session). (1) the d128 backward with it, and with the dQ kernel's descriptors on
# top, against the default, gradients checked; (2) the forward at d128 / d256 with and without it (scripts/
# bench.py, triton alone: its check against the reference included); (3) the Triton GPU suite (test_tma_batched
# compares both views bitwise). The last backward variant puts the dQ kernel on the dK/dV kernel's winning shape (4
# warps, 2 stages, descriptors: offline 282 instructions per 1024 scores, no spill, 97 KB, two CTAs per SM; the
# pinned 128x64/8w/3 by pointers 290).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-next15
stamp ab128
timeout 240 python3 scripts/triton_tile_ab.py --headdims 128 --seqlens 512 1024 2048 8192 16384 --precompile 16 \
    --reps 3 --variants pinned+row-stats pinned+row-stats+tma3d pinned+row-stats+tma3d+dq-tma \
    pinned+row-stats+tma3d+dq-tma+dq-64x64x4x2 \
    --json "$out/ab128.json" > "$out/ab128.log" 2>&1
echo "ab128 rc $?"; grep -E "^\|" "$out/ab128.log"
for batched in 0 1; do
    stamp "fwd batched=$batched"
    FA3NN_TRITON_TMA_BATCHED=$batched timeout 110 python3 scripts/bench.py --backends triton --headdims 128 256 \
        --seqlens 512 1024 2048 8192 --directions fwd --out-dir "$out" --tag fwd_tma3d_$batched --precompile 12 \
        > "$out/bench_fwd_$batched.log" 2>&1
    echo "bench rc $?"; grep -E "^\| (128|256) " "$out/fwd_tma3d_$batched.md" | cut -d'|' -f2-5
done
stamp tests
gpu_pytest tests_triton.log 170 tests/test_triton_gpu.py
stamp done
gpu_archive next15.tar.gz
