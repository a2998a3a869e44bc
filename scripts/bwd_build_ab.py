"""Builds and variants of the native backward side by side: this checkout's library (FA3NN_HOPPER_LIB or the cached
build) in each of `--variants` (hopper_bwd.VARIANTS; default: the head dim's default), then other builds of it in
their default variant or the one after @ (`--compare NAME=PATH[@VARIANT]`: measurement builds such as timing-only
ablations, or main's library);
whole backward, same process, rounds interleaved, each mode's time against the first's; and torch.profiler's
per-kernel device times of one call each at the first shape of each head dim. Shapes of the FlashAttention-3 paper
(batch x seqlen = 16384 tokens, nheads x headdim = 2048), bf16, MHA.

    python scripts/bwd_build_ab.py [--variants bulk_dq red_dq] [--compare base=/tmp/base.so] [--headdims 256]
        [--seqlens 512 8192] --json out.json
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bwd_prepost_ab import ab_arguments, backward_inputs, mode_row, print_mode_table, sweep, timed_rounds  # noqa: E402

from fa3nn.backends import hopper_build, hopper_bwd  # noqa: E402


def add_options(parser) -> None:
    parser.add_argument("--variants", nargs="+", default=["default"], metavar="VARIANT",
                        help="this build's variants (hopper_bwd.VARIANTS, or default)")
    parser.add_argument("--compare", nargs="+", default=[], metavar="NAME=PATH[@VARIANT]",
                        help="other library builds, each in its default variant or VARIANT")


def main() -> None:
    args = ab_arguments(__doc__, add_options)
    modes = {v: ({} if v == "default" else dict(variant=v)) for v in args.variants}
    for item in args.compare:
        name, sep, rest = item.partition("=")
        path, at, variant = rest.partition("@")
        if not sep or not name or name in modes or (at and variant not in hopper_bwd.VARIANTS):
            sys.exit(f"--compare expects NAME=PATH[@VARIANT] with names other than the variants' and a variant of "
                     f"{', '.join(hopper_bwd.VARIANTS)}, got {item!r}")
        modes[name] = dict(library=hopper_build.load(Path(path)), **(dict(variant=variant) if at else {}))

    def measure(headdim, seqlen, causal, args, profiles):
        inputs, flops = backward_inputs(headdim, seqlen, causal, headdim_v=args.headdim_v)
        calls = {mode: (lambda kw=kw: hopper_bwd.launch(*inputs, **kw)) for mode, kw in modes.items()}
        return mode_row(headdim, seqlen, causal, timed_rounds(calls, args, profiles, headdim, seqlen, causal), flops)

    print_mode_table(*sweep(args, measure))


if __name__ == "__main__":
    main()
