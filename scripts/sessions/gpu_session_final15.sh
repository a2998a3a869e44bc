#!/usr/bin/env bash
# 2026-12-02 (fifteenth session), the final code: batched descriptor views and the dQ kernel's descriptors by table
# (configs.TMA_BATCHED / TMA_LOADS), dQ d128 causal up to 1k on 64x64/4w/2. (1) the Triton GPU suite; (2) the
# tables of record, triton / cuDNN / FA2 in one run per head-dim group, forward and backward; (3) small A/Bs at the
# rows still short of 1.2x FA2: d128 backward 512 / 1k causal with the dK/dV kernel on 32x64/4w/2 (offline, batched
# descriptors: 596 warp instructions per 1024 scores against 469, 14 spill instructions against 62), d256 causal
# forward 512 / 1k on 128x32/8w/3 (160 KB, 3 stages through the batched views) and 64x64/8w/2.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-final15
stamp tests
gpu_pytest tests_triton.log 170 tests/test_triton_gpu.py
for group in 128 "64 256"; do
    tag=final15_${group// /_}
    stamp "bench $group"
    timeout 240 python3 scripts/bench.py --backends triton cudnn fa2 --headdims $group --out-dir "$out" --tag "$tag" \
        --precompile 12 > "$out/bench_$tag.log" 2>&1
    echo "bench rc $?"; grep -E "^\| (64|128|256) " "$out/$tag.md" | cut -d'|' -f2-6,9,12,14-
done
stamp ab
timeout 90 python3 scripts/triton_tile_ab.py --precompile 16 --reps 3 --headdims 128 --seqlens 512 1024 --causal yes \
    --variants pinned+row-stats pinned+row-stats+dkdv-32x64x4x2 --json "$out/ab128c.json" > "$out/ab128c.log" 2>&1
echo "ab128c rc $?"; grep -E "^\| pinned" "$out/ab128c.log" | cut -d'|' -f2-5,8-10
timeout 90 python3 scripts/triton_tile_ab.py --direction fwd --precompile 16 --reps 3 --headdims 256 \
    --seqlens 512 1024 --causal yes --variants pinned pinned+fwd-128x32x8x3 pinned+fwd-64x64x8x2 \
    --json "$out/ab256f.json" > "$out/ab256f.log" 2>&1
echo "ab256f rc $?"; grep -E "^\| pinned" "$out/ab256f.log" | cut -d'|' -f2-5,8-10
stamp done
gpu_archive final15.tar.gz
