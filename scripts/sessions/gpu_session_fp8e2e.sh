#!/usr/bin/env bash
# 2026-12-01, last call: FP8 forward end to end (recipe -> fused quantization pass -> native kernel) next to the
# kernel alone, our bf16 native forward and cuDNN, at head dims 128 and 256, seqlen 2k-16k (scripts/bench.py), on
# the session's final FP8 code (16-key-group Vt order, softmax-dependent P V wait).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-fp8e2e
timeout 270 python scripts/bench.py --backends hopper-fp8 hopper cudnn --directions fwd --headdims 128 256 \
    --seqlens 2048 4096 8192 16384 --causal both --reps 5 --out-dir "$out" --tag fp8-e2e > "$out/fp8_e2e.log" 2>&1
echo "fp8 e2e rc $?"; sed -n '/^| hdim/,$p' "$out/fp8-e2e.md" 2>/dev/null
gpu_archive fp8e2e.tgz
