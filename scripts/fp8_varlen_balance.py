"""The native FP8 forward on packed (varlen) batches: its two deals of tiles to CTAs (hopper.VARLEN_DEALS), as
fwd_varlen_balance.py times the bf16 forward's. Kernel only (the operands quantized once, by the fused pass), 16384
packed tokens at the FlashAttention-3 paper's heads (nheads x headdim = 2048), per-tile scales of 128 query rows and
the recipes' default key tiles (fa3nn.fp8.key_blocks.default_block_k). "mixed" draws lengths uniformly from
[256, 4096], "short" from [32, 1024] (seed 0, bwd_varlen_ab.py's cases); a number is every sequence that long.
Dynamic and static alternate within each round; each figure is the median over --rounds.

    python scripts/fp8_varlen_balance.py --json out.json [--headdims 64 128 256] [--cases 2048 mixed short]
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import TOKENS, WIDTH, time_ms  # noqa: E402
from bwd_varlen_ab import lengths_of  # noqa: E402

from fa3nn.backends.hopper_fp8 import fp8_forward  # noqa: E402
from fa3nn.backends.triton.quantize import quantize_fused  # noqa: E402
from fa3nn.fp8.key_blocks import default_block_k  # noqa: E402
from fa3nn.masks import Window  # noqa: E402
from fa3nn.metrics import attention_flops  # noqa: E402

DEALS = ("dynamic", "static")


def case_rows(headdim: int, case: str, causal: bool, args) -> list[dict]:
    lengths = lengths_of(case)
    nheads = WIDTH // headdim
    starts = torch.tensor([0] + lengths).cumsum(0)
    cu = starts.to(torch.int32).cuda()
    total, longest = int(starts[-1]), max(lengths)
    q, k, v = (torch.randn(total, nheads, headdim, device="cuda").to(torch.bfloat16) for _ in range(3))
    block_k = default_block_k(headdim)
    ops = quantize_fused(q, k, v, 128, block_k, None, None, cu, cu, longest, longest)
    window = Window.from_args(causal, (-1, -1))
    calls = {deal: functools.partial(fp8_forward, ops.q, ops.k, ops.vt, ops.q_descale, ops.k_descale, ops.v_descale,
                                     ops.block_q, ops.block_k, headdim**-0.5, window, cu, cu, longest, longest,
                                     vt_starts=ops.vt_starts, varlen_deal=deal) for deal in DEALS}
    outs = {deal: call() for deal, call in calls.items()}
    same = all(torch.equal(a, b) for a, b in zip(outs["dynamic"], outs["static"]))
    flops = sum(attention_flops(1, nheads, n, n, headdim, headdim, causal) for n in lengths)
    samples = {deal: [] for deal in DEALS}
    for _ in range(args.rounds):
        for deal, call in calls.items():
            samples[deal].append(time_ms([call], args.iters, args.reps))
    ms = {deal: statistics.median(times) for deal, times in samples.items()}
    return [dict(headdim=headdim, case=case, causal=causal, deal=deal, ms=ms[deal], tflops=flops / ms[deal] / 1e9,
                 dynamic_over_static=ms["static"] / ms["dynamic"], bitwise_equal=same, samples_ms=samples[deal],
                 sequences=len(lengths)) for deal in DEALS]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--headdims", type=int, nargs="+", default=[64, 128, 256])
    parser.add_argument("--cases", nargs="+", default=["2048", "mixed", "short"])
    parser.add_argument("--causal", choices=("both", "yes", "no"), default="both")
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    causals = {"both": (False, True), "yes": (True,), "no": (False,)}[args.causal]
    rows = [row for headdim in args.headdims for case in args.cases for causal in causals
            for row in case_rows(headdim, case, causal, args)]
    meta = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, tokens=TOKENS)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(meta=meta, rows=rows), f, indent=1)
    print(meta)
    print("| hdim | case | causal | dynamic TFLOP/s | static TFLOP/s | dynamic / static | bitwise equal |")
    print("|---|---|---|---|---|---|---|")
    for dyn, sta in zip(rows[::2], rows[1::2]):
        print(f"| {dyn['headdim']} | {dyn['case']} | {'yes' if dyn['causal'] else 'no'} | {dyn['tflops']:.0f} | "
              f"{sta['tflops']:.0f} | {dyn['dynamic_over_static']:.3f} | {dyn['bitwise_equal']} |")


if __name__ == "__main__":
    main()
