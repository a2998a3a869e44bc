#!/usr/bin/env bash
# Prepared 2026-12-01 eighth session: Nsight Compute of the promoted FP8 kernels against the unpromoted one they lose
# 11-20% to (d128, 16k, non-causal, K/V tiles of 384 rows so every kernel takes its own key block): the default
# (192-key, serial steps), fused_turn (128-key, one turn per block), serial (128-key) and key_block_192 (unpromoted,
# overlapped). What to read: tensor pipe utilization, issue slots busy, and the warp stall reasons at the turn barrier
# (BAR.SYNC) and the wgmma waits (WARPGROUP.DEPBAR): the turn model (NOTES, eighth session) says the serial kernels'
# tensor cores idle while both warpgroups run their softmax.
#   bash scripts/sessions/gpu_session_promoted_profile.sh [PER_CASE_S [NAME=VARIANT...]]   (default: the four cases below;
#   2026-12-02: default=full unpromoted=key_block_192, the default being the fused 192-key kernel then)
set -u
per_case_s=${1:-100}
shift $(($# > 0 ? 1 : 0))
cases=${*:-default=full fused_turn=fused_turn serial=serial unpromoted=key_block_192}
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-promoted-profile

for c in $cases; do gpu_ncu_fp8 "${c%%=*}" "${c#*=}" "$per_case_s"; done
gpu_archive promoted_profile.tgz
