#!/usr/bin/env bash
# Last call of 2026-11-30 late night, after explicit LDS/STS and m128 landed: (1) every backward variant timed
# (d128, d64 at 2048/16384; the defaults may have changed rank), (2) the in-kernel GQA backward re-measured (its
# numbers predate both changes), (3) a torch.profiler step of llama-1b at 4096 (fa3nn vs SDPA) for issue 7's "where
# the time goes". Needs build/libfa3nn_hopper.so carried. One archive.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-late
stamp variants
timeout 110 python scripts/hopper_bwd_device_check.py --variants bulk_dq_overlap bulk_dq red_dq overlap m128 \
    --headdims 128 64 --seqlens 2048 16384 --reps 3 > "$out/bwd_check.log" 2>&1
echo "bwd check rc $?"; grep -E "FAIL" "$out/bwd_check.log"; sed -n '/^| hdim/,$p' "$out/bwd_check.log"
stamp gqa
timeout 70 python scripts/hopper_bwd_gqa_check.py --reps 3 > "$out/gqa.log" 2>&1
echo "gqa rc $?"; sed -n '/^| /,$p' "$out/gqa.log" | tail -n 20
stamp profile
timeout 110 python scripts/profile_step.py --config llama-1b --out-dir "$out/prof" --steps 3 --warmup 2 \
    data.seq_len=4096 run.micro_batch_size=4 > "$out/profile.log" 2>&1
echo "profile rc $?"; grep -vE "^\s*$" "$out/profile.log" | grep -E "median|step|%" | cut -c1-160 | tail -n 40
rm -f "$out"/prof/*trace*.json
stamp done
gpu_archive late.tgz
