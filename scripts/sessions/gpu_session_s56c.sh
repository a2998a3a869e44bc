#!/usr/bin/env bash
# s56c: Nsight Compute of the d128 backward (NOTES Next 3: FlashAttention-3's d128 backward runs 1.05-1.11x ours on
# the H200 from 2k, and neither its 80-row tile (s55b) nor 5% less shared-memory traffic per row explains it), one long
# non-causal call (2 x 8k x 16 heads, the paper's shape), ours (flash_bwd_kernel alone, its third launch) and cuDNN's
# (every kernel of its profiled call) on main's library (build/s55p). What it should say: the consumer warpgroups'
# stall reasons per instruction (the SASS csv's sampling columns: waiting on wgmma (DEPBAR / WARPGROUP.ARRIVE), on
# barriers (BAR / mbarrier try_wait), on the MUFU exp2 or the LSU), the tensor pipe's busy share against cuDNN's, and
# shared / L2 throughput. The text pages are archived into s56c.tgz.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_start /tmp/fa3nn-s56c s55p
pipes="sm__pipe_(tensor_op_gmma|shared|fma|alu|xu)[a-z_]*cycles_active.avg.pct_of_peak_sustained_active"
banks="l1tex__data_bank_(reads|writes).avg.pct_of_peak_sustained_elapsed"
stalls="smsp__average_warps_issue_stalled_[a-z_]*_per_issue_active.ratio"
for who in bwd cudnn-bwd; do
    if [ "$who" = bwd ]; then
        sel=(-k "regex:flash_bwd_kernel" --launch-skip 2 --launch-count 1)
    else
        sel=(--nvtx --nvtx-include "profiled/")
    fi
    timeout 150 ncu --clock-control none --set full --import-source no "${sel[@]}" -f -o "$out/ncu_$who" \
        python3 scripts/hopper_profile_case.py --kernel $who --headdim 128 --seqlen 8192 > "$out/ncu_$who.log" 2>&1
    echo "ncu $who rc $?"
    gpu_ncu_pages "ncu_$who"
    grep -E "^  [a-zA-Z_].*\(|Duration|Registers Per|Block Size|Grid Size|Dynamic Shared|Issue Slots Busy" \
        "$out/ncu_$who.details.txt" | head -n 24
    grep -E "^  [a-zA-Z_].*\(|$pipes|$banks|lts__t_sectors.avg.pct_of_peak_sustained_elapsed" \
        "$out/ncu_$who.raw.txt" | head -n 24
    grep -E "$stalls" "$out/ncu_$who.raw.txt" | awk '$NF > 0.05' | sort -k3 -gr | head -n 12
    stamp "ncu $who"
done
rm -f "$out"/*.ncu-rep  # 16 MiB a returned file: the text pages carry what is read
gpu_archive s56c.tgz
