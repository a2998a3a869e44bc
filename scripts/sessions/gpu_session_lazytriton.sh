#!/usr/bin/env bash
# (Ran 2026-12-01 15:27 UTC; the lazy Triton rescale it timed lost and was reverted, so FA3NN_TRITON_RESCALE_LOG2 no
# longer exists, and d64 tiles_b is back to 192 x 128: this script is the record of that run, see benchmarks/NOTES.md
# "Two experiments that lost".)
# 2026-12-01 fifth session: (1) the Triton forward's lazy rescale (FA3NN_TRITON_RESCALE_LOG2=8, the new default)
# against the eager one (=0), forward only, every head dim and length, two bench.py runs back to back in this call
# (offline, Triton 3.6: the skipped multiply saves 33-64 of ~360-600 loop instructions per step, but the d256
# 128x64/8w tile spills 104 B against 24 B); (2) the Triton GPU suite on the lazy default; (3) native d64 forward
# with 128 x 192 tiles (variant tiles_b, 2 consumers, Q double-buffered) against the default 192 x 128 / 3 consumers.
# Carry build/libfa3nn_hopper.so.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-lazytriton
stamp "d64 tiles"
timeout 200 python3 scripts/bench_hopper.py --json "$out/d64tiles.json" --headdims 64 \
    --seqlens 512 1024 2048 4096 8192 16384 --variants full tiles_b --ablation-seqlens > "$out/d64tiles.log" 2>&1
echo "bench rc $?"; sed -n '/^| hdim/,$p' "$out/d64tiles.log" | grep -E "^\| [0-9]" | cut -d'|' -f2-8
for r in 8 0; do
    stamp "triton fwd rescale_log2=$r"
    FA3NN_TRITON_RESCALE_LOG2=$r timeout 200 python3 scripts/bench.py --backends triton cudnn --directions fwd \
        --headdims 64 128 256 --precompile 12 --out-dir "$out" --tag "tfwd_r$r" > "$out/tfwd_r$r.log" 2>&1
    echo "rc $?"; grep -E "^\| (64|128|256) " "$out/tfwd_r$r.md" | cut -d'|' -f2-5 | paste -sd';' | fold -w 240
done
stamp tests
gpu_pytest tests_triton.log 200 tests/test_triton_gpu.py
gpu_archive lazytriton.tgz
stamp done
