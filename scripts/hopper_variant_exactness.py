"""Is a native bf16 forward benchmark variant the same function as the default kernel? Runs both on the same inputs
at FA3's shapes (batch x seqlen = 16384 tokens, nheads x headdim = 2048), causal and not, and prints the largest
absolute difference of the outputs and of the lse (a variant that only changes how a value is computed, e.g.
int_max, should differ by exactly 0). Each shape runs twice: on randn inputs and on q = -|x|, k = |y|, where every
score is negative (the rows int_max hands to the float tree).

    python scripts/hopper_variant_exactness.py --variant int_max --headdims 64 128 256 --seqlens 1024 4096
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_hopper import TOKENS, WIDTH  # noqa: E402

from fa3nn.backends.hopper import launch  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", required=True)
    parser.add_argument("--headdims", type=int, nargs="+", default=[128])
    parser.add_argument("--seqlens", type=int, nargs="+", default=[1024, 4096])
    args = parser.parse_args()
    print("| d | seqlen | inputs | causal | max abs diff out | max abs diff lse |")
    print("|---|---|---|---|---|---|")
    worst = 0.0
    for headdim in args.headdims:
        for seqlen in args.seqlens:
            batch, nheads = TOKENS // seqlen, WIDTH // headdim
            for inputs in ("randn", "negative"):
                gen = torch.Generator(device="cuda").manual_seed(seqlen + headdim)
                q, k, v = (torch.randn(batch, seqlen, nheads, headdim, device="cuda", dtype=torch.bfloat16,
                                       generator=gen) for _ in range(3))
                if inputs == "negative":
                    q, k = -q.abs(), k.abs()
                for causal in (False, True):
                    scale = headdim ** -0.5
                    out_a, lse_a = launch(q, k, v, scale, causal)
                    out_b, lse_b = launch(q, k, v, scale, causal, variant=args.variant)
                    d_out = (out_a.float() - out_b.float()).abs().max().item()
                    d_lse = (lse_a - lse_b).abs().max().item()
                    worst = max(worst, d_out, d_lse)
                    print(f"| {headdim} | {seqlen} | {inputs} | {causal} | {d_out:.3g} | {d_lse:.3g} |")
    print(f"worst {worst:.3g}")


if __name__ == "__main__":
    main()
