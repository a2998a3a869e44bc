"""The native backward's schedules where a call has few tiles: MHA (or GQA split into parts, which runs as MHA) on one
or two sequences, causal, where s49a measured the MHA kernel at 0.78x cuDNN (8 heads, one 8k sequence, 512 tiles)
against 0.98-1.10x at the paper's 2048 tiles. Per shape: hopper_bwd.launch with auto's schedule, one CTA per tile in
the MHA order (key blocks innermost), one CTA per tile longest first (key blocks outermost: every head's key block 0
first), and persistent (boustrophedon rounds); whole backward, bf16, rounds interleaved, TFLOP/s and x auto.

    python scripts/bwd_few_tiles_ab.py --json out.json [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import time_ms  # noqa: E402

from fa3nn.backends import hopper_bwd  # noqa: E402
from fa3nn.backends.hopper import launch as forward  # noqa: E402
from fa3nn.metrics import attention_flops  # noqa: E402

SHAPES = [(1, 8192, 8, 128), (2, 4096, 8, 128), (1, 2048, 32, 128), (1, 8192, 8, 256), (1, 8192, 16, 64)]
MODES = {
    "auto": {},
    "per_tile_inner": dict(schedule="per_tile", grid_order="key_blocks_inner"),
    "per_tile_outer": dict(schedule="per_tile", grid_order="key_blocks_outer"),
    "persistent": dict(schedule="persistent"),
}


def _launcher(inputs, kw):
    return lambda: hopper_bwd.launch(*inputs, **kw)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iters", type=int, default=8)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    rows = []
    for batch, seqlen, nheads, headdim in SHAPES:
        for causal in (True, False):
            q, k, v = (torch.randn(batch, seqlen, nheads, headdim, device="cuda", dtype=torch.bfloat16)
                       for _ in range(3))
            scale = headdim**-0.5
            out, lse = forward(q, k, v, scale, causal)
            inputs = (torch.randn_like(out), q, k, v, out, lse, scale, causal)
            flops = attention_flops(batch, nheads, seqlen, seqlen, headdim, causal=causal, direction="bwd")
            samples = {mode: [] for mode in MODES}
            for _ in range(args.rounds):
                for mode, kw in MODES.items():
                    samples[mode].append(time_ms([_launcher(inputs, kw)], args.iters, 1))
            ms = {mode: statistics.median(s) for mode, s in samples.items()}
            rows.append(dict(batch=batch, seqlen=seqlen, nheads=nheads, headdim=headdim, causal=causal, ms=ms,
                             samples=samples, tflops={m: flops / t / 1e9 for m, t in ms.items()}))
            if args.json:
                args.json.write_text(json.dumps(rows, indent=1))
    print("| shape | causal | " + " | ".join(MODES) + " | " + " | ".join(f"{m} x auto" for m in list(MODES)[1:]) + " |")
    print("|---" * (2 + 2 * len(MODES) - 1) + "|")
    for r in rows:
        t = r["tflops"]
        shape = f"{r['batch']} x {r['seqlen']}, {r['nheads']} heads, d{r['headdim']}"
        print(f"| {shape} | {'yes' if r['causal'] else 'no'} | "
              + " | ".join(f"{t[m]:.1f}" for m in MODES) + " | "
              + " | ".join(f"{t[m] / t['auto']:.3f}" for m in list(MODES)[1:]) + " |")


if __name__ == "__main__":
    main()
