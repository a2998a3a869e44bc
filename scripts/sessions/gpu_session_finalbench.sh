#!/usr/bin/env bash
# The integrated benchmark table from the final code (2026-12-01, third session): scripts/bench.py with our native
# (hopper) and Triton backends beside cuDNN and FlashAttention-2 through torch SDPA, forward and backward, every
# seqlen of the FA3 paper's grid, causal and not, for the head dims given (one call per group keeps each under the
# device's 10-minute limit; bench.py writes its JSON and markdown after every shape, so a cut run keeps what it
# measured). Optional second argument: extra bench.py arguments. Carry build/libfa3nn_hopper.so.
#   bash scripts/sessions/gpu_session_finalbench.sh "128"     bash scripts/sessions/gpu_session_finalbench.sh "64 256"
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-finalbench
hdims=${1:-128}
tag="final-d${hdims// /-d}"
stamp "bench d$hdims"
timeout 540 python3 scripts/bench.py --backends hopper triton cudnn fa2 --headdims $hdims --precompile 8 \
    --out-dir "$out" --tag "$tag" ${2:-} > "$out/$tag.log" 2>&1
echo "bench rc $?"; grep -c '"headdim"' "$out/$tag.log"
stamp done
