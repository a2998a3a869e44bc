"""Run the native Hopper forward a few times at one FA3-paper shape, for a profiler to attach to:

    ncu --clock-control none -k regex:flash_fwd_kernel --launch-skip 2 --launch-count 1 \\
        --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \\
        python scripts/hopper_profile_case.py --headdim 128 --seqlen 16384
"""

import argparse

import torch

from fa3nn.backends.hopper import launch

parser = argparse.ArgumentParser()
parser.add_argument("--headdim", type=int, default=128)
parser.add_argument("--seqlen", type=int, default=16384)
parser.add_argument("--causal", action="store_true")
parser.add_argument("--calls", type=int, default=3)
args = parser.parse_args()
batch, nheads = 16384 // args.seqlen, 2048 // args.headdim
q, k, v = (torch.randn(batch, args.seqlen, nheads, args.headdim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
for _ in range(args.calls):
    launch(q, k, v, args.headdim**-0.5, args.causal)
torch.cuda.synchronize()
print(f"ran {args.calls} calls: d{args.headdim} seqlen {args.seqlen} causal={args.causal}")
