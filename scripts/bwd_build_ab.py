"""Builds and variants of the native backward side by side: this checkout's library (FA3NN_HOPPER_LIB or the cached
build) in each of `--variants` (hopper_bwd.VARIANTS; default: the head dim's default), then other builds of it in
their default variant (`--compare NAME=PATH`: measurement builds such as timing-only ablations, or main's library);
whole backward, same process, rounds interleaved, each mode's time against the first's; and torch.profiler's
per-kernel device times of one call each at the first shape of each head dim. Shapes of the FlashAttention-3 paper
(batch x seqlen = 16384 tokens, nheads x headdim = 2048), bf16, MHA.

    python scripts/bwd_build_ab.py [--variants bulk_dq red_dq] [--compare base=/tmp/base.so] [--headdims 256]
        [--seqlens 512 8192] --json out.json
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bwd_prepost_ab import ab_arguments, backward_inputs, sweep, timed_rounds  # noqa: E402

from fa3nn.backends import hopper_build, hopper_bwd  # noqa: E402


def add_options(parser) -> None:
    parser.add_argument("--variants", nargs="+", default=["default"], metavar="VARIANT",
                        help="this build's variants (hopper_bwd.VARIANTS, or default)")
    parser.add_argument("--compare", nargs="+", default=[], metavar="NAME=PATH", help="other library builds")


def main() -> None:
    args = ab_arguments(__doc__, add_options)
    modes = {v: ({} if v == "default" else dict(variant=v)) for v in args.variants}
    base = args.variants[0]
    for item in args.compare:
        name, sep, path = item.partition("=")
        if not sep or not name or name in modes:
            sys.exit(f"--compare expects NAME=PATH with names other than the variants', got {item!r}")
        modes[name] = dict(library=hopper_build.load(Path(path)))

    def measure(headdim, seqlen, causal, args, profiles):
        inputs, flops = backward_inputs(headdim, seqlen, causal)
        calls = {mode: (lambda kw=kw: hopper_bwd.launch(*inputs, **kw)) for mode, kw in modes.items()}
        samples = timed_rounds(calls, args, profiles, headdim, seqlen, causal)
        ratios = {mode: statistics.median(a / b for a, b in zip(samples[base], samples[mode])) for mode in modes}
        return dict(headdim=headdim, seqlen=seqlen, causal=causal, samples_ms=samples, speedups=ratios,
                    tflops={mode: flops / statistics.median(samples[mode]) / 1e9 for mode in modes})

    rows, profiles = sweep(args, measure)
    others = list(modes)[1:]
    print(f"| d | seqlen | causal | bwd TFLOP/s {base} | " + " | ".join(f"{m}: x {base}" for m in others) + " |")
    print("|---|---|---|---|" + "---|" * len(others))
    for r in rows:
        cells = [f"{r['tflops'][m]:.1f}: {r['speedups'][m]:.3f}" for m in others]
        print(f"| {r['headdim']} | {r['seqlen']} | {'yes' if r['causal'] else 'no'} | {r['tflops'][base]:.1f} | "
              + " | ".join(cells) + " |")
    for p in profiles:
        print(f"d{p['headdim']} {p['seqlen']} main kernel us: " + ", ".join(
            f"{m} {next((t for k, t in p[m].items() if k.startswith('flash_bwd_kernel')), 0):.1f}" for m in modes))


if __name__ == "__main__":
    main()
