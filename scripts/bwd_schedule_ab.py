"""The native backward's main kernel with one CTA per (key block, K/V head, batch) tile against the persistent form
(one CTA per SM chaining tiles; hopper_bwd.launch(schedule=...)), each with dK / dV stored 16 bytes at a time (the
default) or 4 (scalar_dkdv), whole backward, same process, rounds interleaved, against the first mode; and
torch.profiler's per-kernel device times of one call each way at the first shape of each head dim. Shapes of the
FlashAttention-3 paper (batch x seqlen = 16384 tokens, nheads x headdim = 2048), bf16, MHA; per_tile_outer: one CTA
per tile with key blocks outermost (every head's key block 0, the longest causal tile, first).

    python scripts/bwd_schedule_ab.py --json out.json [--headdims 64 128] [--seqlens 512 2048 16384] [--rounds 7]
    python scripts/bwd_schedule_ab.py --headdims 192 --headdim-v 128 --seqlens 2048 8192   # MLA's head dims
    python scripts/bwd_schedule_ab.py --headdims 192 --headdim-v 128 --variant mla_keys    # a variant's schedules
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bwd_prepost_ab import ab_arguments, backward_inputs, mode_row, print_mode_table, sweep, timed_rounds  # noqa: E402

from fa3nn.backends import hopper_bwd  # noqa: E402

# hopper_bwd.launch's arguments per mode; the first is the baseline the others are timed against.
# Earlier sessions' modes are in benchmarks/NOTES.md: s27b's (persistent with an L2 prefetch of the next K/V, since
# removed, and in key-blocks-outermost order), s27d's (4-byte dK / dV stores, scalar_dkdv) and s28a's (causal
# persistent dealt plainly, since dealt boustrophedon).
MODES = {
    "per_tile": dict(schedule="per_tile"),
    "persistent": dict(schedule="persistent"),
    "per_tile_outer": dict(schedule="per_tile", grid_order="key_blocks_outer"),
}


def add_options(parser) -> None:
    parser.add_argument("--variant", default=None, choices=list(hopper_bwd.VARIANTS),
                        help="the kernel variant every mode runs (default: the head dim's)")


def measure(headdim: int, seqlen: int, causal: bool, args, profiles: list) -> dict:
    inputs, flops = backward_inputs(headdim, seqlen, causal, headdim_v=args.headdim_v)
    calls = {mode: (lambda kw=kw: hopper_bwd.launch(*inputs, variant=args.variant, **kw)) for mode, kw in MODES.items()}
    return mode_row(headdim, seqlen, causal, timed_rounds(calls, args, profiles, headdim, seqlen, causal), flops)


def main() -> None:
    print_mode_table(*sweep(ab_arguments(__doc__, add_options), measure))


if __name__ == "__main__":
    main()
