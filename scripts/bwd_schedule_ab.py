"""The native backward's main kernel with one CTA per (key block, K/V head, batch) tile against the persistent form
(one CTA per SM chaining tiles; hopper_bwd.launch(schedule=...)), each with dK / dV stored 16 bytes at a time (the
default) or 4 (scalar_dkdv), whole backward, same process, rounds interleaved, against the first mode; and
torch.profiler's per-kernel device times of one call each way at the first shape of each head dim. Shapes of the
FlashAttention-3 paper (batch x seqlen = 16384 tokens, nheads x headdim = 2048), bf16, MHA.

    python scripts/bwd_schedule_ab.py --json out.json [--headdims 64 128] [--seqlens 512 2048 16384] [--rounds 7]
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bwd_prepost_ab import ab_arguments, backward_inputs, sweep, timed_rounds  # noqa: E402

from fa3nn.backends import hopper_bwd  # noqa: E402

# hopper_bwd.launch's arguments per mode; the first is the baseline the others are timed against.
# Earlier sessions' modes are in benchmarks/NOTES.md: s27b's (persistent with an L2 prefetch of the next K/V, since
# removed, and in key-blocks-outermost order), s27d's (4-byte dK / dV stores, scalar_dkdv) and s28a's (causal
# persistent dealt plainly, since dealt boustrophedon).
MODES = {
    "per_tile": dict(schedule="per_tile"),
    "persistent": dict(schedule="persistent"),
}
BASE = next(iter(MODES))


def measure(headdim: int, seqlen: int, causal: bool, args, profiles: list) -> dict:
    inputs, flops = backward_inputs(headdim, seqlen, causal)
    calls = {mode: (lambda kw=kw: hopper_bwd.launch(*inputs, **kw)) for mode, kw in MODES.items()}
    samples = timed_rounds(calls, args, profiles, headdim, seqlen, causal)
    speedups = {}
    for mode in MODES:
        ratios = sorted(a / b for a, b in zip(samples[BASE], samples[mode]))
        speedups[mode] = (statistics.median(ratios), ratios[len(ratios) // 4], ratios[3 * len(ratios) // 4])
    return dict(headdim=headdim, seqlen=seqlen, causal=causal, samples_ms=samples,
                tflops={mode: flops / statistics.median(samples[mode]) / 1e9 for mode in MODES}, speedups=speedups)


def main() -> None:
    rows, profiles = sweep(ab_arguments(__doc__), measure)
    others = list(MODES)[1:]
    print(f"| d | seqlen | causal | bwd TFLOP/s {BASE} | " + " | ".join(f"{m}: x {BASE} (quartiles)" for m in others)
          + " |")
    print("|---|---|---|---|" + "---|" * len(others))
    for r in rows:
        cells = [f"{r['tflops'][m]:.1f}: {s[0]:.3f} ({s[1]:.3f}-{s[2]:.3f})"
                 for m, s in ((m, r['speedups'][m]) for m in others)]
        print(f"| {r['headdim']} | {r['seqlen']} | {'yes' if r['causal'] else 'no'} | {r['tflops'][BASE]:.1f} | "
              + " | ".join(cells) + " |")
    for p in profiles:
        print(f"d{p['headdim']} {p['seqlen']} main kernel us: " + ", ".join(
            f"{m} {next((t for k, t in p[m].items() if k.startswith('flash_bwd_kernel')), 0):.1f}" for m in MODES))


if __name__ == "__main__":
    main()
