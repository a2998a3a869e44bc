#!/usr/bin/env bash
# 2026-12-04 (twenty-ninth session, eighth call): a Hugging Face training step on padded batches (patch_hf unpads to
# varlen): the native varlen backward x the Triton one it replaced x SDPA (scripts/hf_varlen_step_ab.py). Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s29h
stamp hf
timeout 300 python scripts/hf_varlen_step_ab.py --rounds 5 --json "$out/hf_varlen.json" > "$out/hf_varlen.log" 2>&1
echo "hf rc $?"; tail -n 8 "$out/hf_varlen.log"
stamp done
