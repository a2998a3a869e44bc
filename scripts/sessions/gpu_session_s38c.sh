#!/usr/bin/env bash
# Thirty-eighth session, second call: bench.py's forward rows at multi-head latent attention's head dims (q / k 192,
# v 128) for the native kernel beside Triton's (349 / 433 TFLOP/s causal at 2k / 8k in s35, 0.69-0.74x cuDNN) and
# cuDNN; then s38a's fa3_compat_bench (sinks / plain, causal and window 128) for the Triton and native backends.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s38c
stamp start
timeout 260 python3 scripts/bench.py --backends hopper triton cudnn --headdims 192 --headdim-v 128 \
    --seqlens 512 2048 8192 16384 --directions fwd --out-dir "$out" --tag mla_fwd --precompile 12 \
    > "$out/bench_mla.log" 2>&1
echo "bench rc $?"; grep -E "^\| " "$out/mla_fwd.md" | head -n 20
stamp bench
for backend in triton hopper; do
    timeout 150 python scripts/fa3_compat_bench.py --backend $backend --json "$out/fa3_compat_$backend.json" \
        > "$out/fa3_compat_$backend.log" 2>&1
    echo "$backend rc $?"; tail -n 5 "$out/fa3_compat_$backend.log"
    stamp "$backend"
done
