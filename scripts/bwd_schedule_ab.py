"""The native backward's main kernel with one CTA per (key block, K/V head, batch) tile against the persistent form
(one CTA per SM chaining tiles; hopper_bwd.launch(schedule=...)), whole backward, same process, rounds interleaved;
and torch.profiler's per-kernel device times of one call each way at the first shape of each head dim. Shapes of the
FlashAttention-3 paper (batch x seqlen = 16384 tokens, nheads x headdim = 2048), bf16, MHA.

    python scripts/bwd_schedule_ab.py --json out.json [--headdims 64 128] [--seqlens 512 2048 16384] [--rounds 7]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import time_ms  # noqa: E402
from bwd_prepost_ab import backward_inputs, kernel_times  # noqa: E402

from fa3nn.backends import hopper_bwd  # noqa: E402

MODES = ("per_tile", "persistent")


def measure(headdim: int, seqlen: int, causal: bool, args, profiles: list) -> dict:
    inputs, flops = backward_inputs(headdim, seqlen, causal)
    calls = {mode: (lambda mode=mode: hopper_bwd.launch(*inputs, schedule=mode)) for mode in MODES}
    if seqlen == args.seqlens[0] and not causal:
        profiles.append(dict(headdim=headdim, seqlen=seqlen, **{mode: kernel_times(c) for mode, c in calls.items()}))
        print(profiles[-1], file=sys.stderr, flush=True)
    samples = {mode: [] for mode in calls}
    for _ in range(args.rounds):
        for mode, c in calls.items():
            samples[mode].append(time_ms([c], args.iters, 1))
    ratios = sorted(a / b for a, b in zip(samples["per_tile"], samples["persistent"]))
    return dict(headdim=headdim, seqlen=seqlen, causal=causal, samples_ms=samples,
                **{f"{mode}_tflops": flops / statistics.median(samples[mode]) / 1e9 for mode in MODES},
                speedup=statistics.median(ratios), quartiles=(ratios[len(ratios) // 4], ratios[3 * len(ratios) // 4]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--headdims", nargs="+", type=int, default=[64, 128])
    parser.add_argument("--seqlens", nargs="+", type=int, default=[512, 1024, 2048, 4096, 16384])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    rows, profiles = [], []
    for headdim in args.headdims:
        for seqlen in args.seqlens:
            for causal in (False, True):
                rows.append(measure(headdim, seqlen, causal, args, profiles))
                print({k: v for k, v in rows[-1].items() if k != "samples_ms"}, file=sys.stderr, flush=True)
                if args.json:
                    args.json.write_text(json.dumps(dict(device=torch.cuda.get_device_name(), rows=rows,
                                                         profiles=profiles), indent=1))
    print("| d | seqlen | causal | bwd TFLOP/s one CTA per tile | persistent | per-tile time / persistent time "
          "(quartiles) |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['headdim']} | {r['seqlen']} | {'yes' if r['causal'] else 'no'} | {r['per_tile_tflops']:.1f} | "
              f"{r['persistent_tflops']:.1f} | {r['speedup']:.3f} ({r['quartiles'][0]:.3f}-{r['quartiles'][1]:.3f}) |")
    for p in profiles:
        print(f"d{p['headdim']} {p['seqlen']} kernel us, per tile: {p['per_tile']}  persistent: {p['persistent']}")


if __name__ == "__main__":
    main()
