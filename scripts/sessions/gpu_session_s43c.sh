#!/usr/bin/env bash
# cuDNN's MLA backward under Nsight Compute (s43b's NVTX range missed it: autograd ran it on its device thread; now
# on the calling thread), causal 8k, launch statistics and the throughput sections, beside s43b's of ours.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s43c
stamp start
timeout 200 ncu --clock-control none --set full --import-source no --nvtx --nvtx-include "profiled/" \
    -f -o "$out/ncu_cudnn" python3 scripts/hopper_profile_case.py --kernel cudnn-bwd --headdim 192 --headdim-v 128 \
    --seqlen 8192 --causal --calls 2 > "$out/ncu_cudnn.log" 2>&1
echo "ncu rc $?"; tail -n 3 "$out/ncu_cudnn.log"
ncu -i "$out/ncu_cudnn.ncu-rep" --page details > "$out/ncu_cudnn.details.txt" 2>&1
ncu -i "$out/ncu_cudnn.ncu-rep" --page raw > "$out/ncu_cudnn.raw.txt" 2>&1
grep -E "^  [a-zA-Z_].*\(|Duration|Registers Per|Block Size|Grid Size|Dynamic Shared|Cluster Size|L2 Cache Thr|Compute \(SM\)|Issue Slots|highest-util" \
    "$out/ncu_cudnn.details.txt" | head -n 60
stamp ncu
gpu_archive s43c.tgz
