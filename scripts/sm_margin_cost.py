"""What FlashAttention-3's sm_margin costs fa3nn's native kernels: the forward (hopper.launch) or the whole backward
(hopper_bwd.backward, which with a margin runs its main kernel persistent on SMs - margin CTAs) at margins 0 (the
default), then each of --margins, same process, rounds interleaved, each against margin 0; the backward also with the
persistent schedule on every SM (persistent_all), which separates the schedule change from the SMs given up.
Shapes of the FlashAttention-3 paper (batch x seqlen = 16384 tokens, nheads x headdim = 2048), bf16, MHA. With no
overlapping kernel the margin's SMs idle, so the ideal cost of a margin m is the work's spread over SMs - m:
speedup (SMs - m) / SMs (0.94 for 8 of 132). --window LEFT: the sliding window (LEFT, 0) instead (causal only),
whose backward runs one CTA per tile without a margin (flash_bwd_launch.cuh use_persistent_bwd). TFLOP/s count every
key of the causal rows (the windowed calls' rows are the same work at every margin).

    python scripts/sm_margin_cost.py --direction bwd --json out.json [--headdims 128] [--seqlens 2048 8192]
    [--margins 8 16 32] [--rounds 5] [--window 1024]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bwd_prepost_ab import ab_arguments, backward_inputs, mode_row, print_mode_table, sweep, timed_rounds  # noqa: E402

from fa3nn.backends import hopper_bwd  # noqa: E402
from fa3nn.backends.base import AttnParams  # noqa: E402
from fa3nn.backends.hopper import launch as forward  # noqa: E402
from fa3nn.masks import Window  # noqa: E402
from fa3nn.metrics import BACKWARD_FLOPS_RATIO  # noqa: E402


def _extra(parser) -> None:
    parser.add_argument("--direction", choices=("fwd", "bwd"), default="bwd")
    parser.add_argument("--margins", nargs="+", type=int, default=[8, 16, 32])
    parser.add_argument("--window", type=int, default=None, help="left window size (causal windows only)")


def measure(headdim: int, seqlen: int, causal: bool, args, profiles: list) -> dict:
    (dout, q, k, v, out, lse, scale, _), flops = backward_inputs(headdim, seqlen, causal, headdim_v=args.headdim_v)
    window = (-1, -1) if args.window is None else (args.window, 0)
    if args.window is not None:
        if not causal:
            return dict(headdim=headdim, seqlen=seqlen, causal=causal, tflops={})  # dropped by main
        out, lse = forward(q, k, v, scale, causal, window_size=window)
    if args.direction == "fwd":
        flops /= BACKWARD_FLOPS_RATIO  # backward_inputs counts the backward's
        calls = {f"m{m}": (lambda m=m: forward(q, k, v, scale, causal, window_size=window, sm_margin=m))
                 for m in (0, *args.margins)}
    else:
        def params(m):
            return AttnParams(scale, Window.from_args(causal, window), 0.0, False, m)

        calls = {f"m{m}": (lambda m=m: hopper_bwd.backward(dout, q, k, v, out, lse, None, params(m), None))
                 for m in (0, *args.margins)}
        calls["persistent_all"] = lambda: hopper_bwd.launch(dout, q, k, v, out, lse, scale, causal,
                                                            window_size=window, schedule="persistent")
    return mode_row(headdim, seqlen, causal, timed_rounds(calls, args, profiles, headdim, seqlen, causal), flops)


def main() -> None:
    args = ab_arguments(__doc__, _extra)
    rows, profiles = sweep(args, measure)
    print_mode_table([r for r in rows if r["tflops"]], profiles, direction=args.direction)


if __name__ == "__main__":
    main()
