"""How much of the native backward's time at short seqlens is each CTA's fixed cost: the same query heads and FLOPs
with K/V shared by `group` query heads (GQA), so that each CTA walks group x the query-block steps after one K/V load
and before one dK/dV store, and there are 1/group as many CTAs. The main kernel's rate under group g bounds what
chaining tiles per CTA (a persistent backward) could reach for MHA. Whole backward (preprocess + main +
postprocess, the first and last unchanged by the group), bf16, batch x seqlen = 16384 tokens, nheads x headdim = 2048.

    python scripts/bwd_group_probe.py --json out.json [--headdims 128 64] [--seqlens 512 1024 2048] [--groups 1 2 4 8]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import time_ms  # noqa: E402
from bwd_prepost_ab import backward_inputs  # noqa: E402

from fa3nn.backends import hopper_bwd  # noqa: E402


def measure(headdim: int, seqlen: int, group: int, causal: bool, reps: int) -> dict:
    inputs, flops = backward_inputs(headdim, seqlen, causal, group)
    ms = time_ms([lambda: hopper_bwd.launch(*inputs)], 10, reps)
    return dict(headdim=headdim, seqlen=seqlen, group=group, causal=causal, ms=ms, tflops=flops / ms / 1e9)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--headdims", nargs="+", type=int, default=[128, 64])
    parser.add_argument("--seqlens", nargs="+", type=int, default=[512, 1024, 2048, 16384])
    parser.add_argument("--groups", nargs="+", type=int, default=[1, 2, 4, 8])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    rows = []
    for headdim in args.headdims:
        for seqlen in args.seqlens:
            for causal in (False, True):
                for group in args.groups:
                    rows.append(measure(headdim, seqlen, group, causal, args.reps))
                    print(rows[-1], file=sys.stderr, flush=True)
                    if args.json:
                        args.json.write_text(json.dumps(dict(device=torch.cuda.get_device_name(), rows=rows), indent=1))
    print("| d | seqlen | causal | " + " | ".join(f"group {g} TFLOP/s" for g in args.groups) + " |")
    print("|---|---|---|" + "---|" * len(args.groups))
    for headdim in args.headdims:
        for seqlen in args.seqlens:
            for causal in (False, True):
                cells = [f"{r['tflops']:.1f}" for r in rows if (r["headdim"], r["seqlen"], r["causal"]) ==
                         (headdim, seqlen, causal)]
                print(f"| {headdim} | {seqlen} | {'yes' if causal else 'no'} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
