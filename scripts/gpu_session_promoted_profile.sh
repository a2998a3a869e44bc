#!/usr/bin/env bash
# Prepared 2026-12-01 eighth session: Nsight Compute of the promoted FP8 kernels against the unpromoted one they lose
# 11-20% to (d128, 16k, non-causal, K/V tiles of 384 rows so every kernel takes its own key block): the default
# (192-key, serial steps), fused_turn (128-key, one turn per block), serial (128-key) and key_block_192 (unpromoted,
# overlapped). What to read: tensor pipe utilization, issue slots busy, and the warp stall reasons at the turn barrier
# (BAR.SYNC) and the wgmma waits (WARPGROUP.DEPBAR): the turn model (NOTES, eighth session) says the serial kernels'
# tensor cores idle while both warpgroups run their softmax.
#   bash scripts/gpu_session_promoted_profile.sh [PER_CASE_S [NAME=VARIANT...]]   (default: the four cases below;
#   2026-12-02: default=full unpromoted=key_block_192, the default being the fused 192-key kernel then)
set -u
per_case_s=${1:-100}
shift $(($# > 0 ? 1 : 0))
cases=${*:-default=full fused_turn=fused_turn serial=serial unpromoted=key_block_192}
source "$(dirname "$0")/gpu_env.sh"
gpu_setup /tmp/fa3nn-promoted-profile

profile() {  # NAME VARIANT
    timeout "$per_case_s" ncu --clock-control none --set full --import-source no -k "regex:flash_fwd_fp8_kernel" \
        --launch-skip 2 --launch-count 1 -f -o "$out/$1" python3 scripts/hopper_profile_case.py --kernel fp8 \
        --headdim 128 --block-k 384 --variant "$2" > "$out/$1.ncu.log" 2>&1
    echo "$1 rc $?"
    ncu -i "$out/$1.ncu-rep" --page details > "$out/$1.details.txt" 2>&1
    ncu -i "$out/$1.ncu-rep" --page source --csv --print-source sass > "$out/$1.sass.csv" 2>&1
    grep -E "Duration|SM Frequency|Issue Slots Busy|Executed Ipc A|No Eligible|Tensor" "$out/$1.details.txt" | head -n 8
    ncu -i "$out/$1.ncu-rep" --page raw > "$out/$1.raw.txt" 2>&1  # pipe utilizations: MUFU (xu), FMA, tensor
    grep -E "sm__pipe_(xu|fma|alu|tensor_op_gmma|shared)[a-z_]*cycles_active.avg.pct_of_peak_sustained_active|sm__inst_executed_pipe_xu.avg.pct" \
        "$out/$1.raw.txt" | head -n 8
}
for c in $cases; do profile "${c%%=*}" "${c#*=}"; done
gpu_archive promoted_profile.tgz
