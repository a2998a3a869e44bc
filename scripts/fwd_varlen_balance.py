"""The native forward on packed (varlen) batches: its two deals of tiles to CTAs (hopper.VARLEN_DEALS).

The forward walks tiles (m_block, head, sequence) over the longest sequence's query blocks (scheduler.cuh). The
static deal gives CTA i tiles i, i + gridDim.x, ... whatever their lengths, so with sequences of mixed lengths some
CTAs draw more long tiles than others; the dynamic deal (the default) hands each CTA its next tile as it finishes
one. This script times, on 16384 packed tokens at the FlashAttention-3 paper's heads:
- native_varlen: the packed call (auto's deal: dynamic but where every sequence has one length), sequences in the
  drawn order;
- varlen_dynamic / varlen_static: the same call with each deal;
- varlen_sorted / static_sorted: the same lengths with the sequences longest first, dynamic and static (same work);
- native_dense: where every sequence has one length L, the dense (16384 / L, L) call (the same tiles, dense);
- dynamic_<variant> (--variants): the dynamic deal with a forward variant's deal order, e.g. l2_sections (L2-sized
  sections of (sequence, head) pairs, query blocks last-first across each section: at d128 / d256 causal a greedy deal
  in that order simulated 1.02 against the one-pair order's 1.06-1.07 at one length, and 1.01-1.04 on mixed lengths)
  or one_section (one section over every tile);
and prints the static deal's simulated makespan over the balanced one (work spread evenly over the SMs; a tile
costs its key blocks + 0.5, an empty tile 0.05), so the measured gap can be read against the model.
"mixed" draws lengths uniformly from [256, 4096], "short" from [32, 1024] (seed 0, bwd_varlen_ab.py's cases).

    python scripts/fwd_varlen_balance.py --json out.json [--headdims 64 128 256] [--cases 2048 mixed short]
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

from fa3nn.backends.base import Varlen  # noqa: E402
from fa3nn.backends.hopper import launch as forward  # noqa: E402
from fa3nn.metrics import attention_flops  # noqa: E402

# The default forward's tile per head dim (flash_fwd_launch.cuh Tiles<D, 0>; short causal calls use 128 x 128).
TILES = {64: (192, 128), 128: (128, 176), 256: (128, 80)}


DEAL_NAMES = {("native_varlen", "dynamic"): "varlen_dynamic", ("native_varlen", "static"): "varlen_static",
              ("varlen_sorted", "dynamic"): "varlen_sorted", ("varlen_sorted", "static"): "static_sorted"}


def simulated_static_over_balanced(lengths: list[int], nheads: int, tile: tuple[int, int], causal: bool,
                                   sms: int) -> float:
    """The static deal's makespan over the balanced one, in key blocks (the model in the module docstring)."""
    block_m, block_n = tile
    num_m = -(-max(lengths) // block_m)
    costs = []
    for seqlen in lengths:
        for _ in range(nheads):
            for m in (range(num_m - 1, -1, -1) if causal else range(num_m)):
                if m * block_m >= seqlen:
                    costs.append(0.05)
                    continue
                keys = min((m + 1) * block_m, seqlen) if causal else seqlen
                costs.append(-(-keys // block_n) + 0.5)
    load = [0.0] * sms
    for t, cost in enumerate(costs):
        rnd, i = divmod(t, sms)
        load[sms - 1 - i if causal and rnd % 2 else i] += cost
    return max(load) / (sum(costs) / sms)


def packed(lengths: list[int]) -> Varlen:
    starts = [0]
    for n in lengths:
        starts.append(starts[-1] + n)
    cu = torch.tensor(starts, dtype=torch.int32, device="cuda")
    return Varlen(cu, cu, max(lengths), max(lengths), tuple(starts), tuple(starts))


def rows_for(args) -> list:
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for headdim in args.headdims:
        nheads = WIDTH // headdim
        for case in args.cases:
            lengths = lengths_of(case)
            orders = {"native_varlen": lengths, "varlen_sorted": sorted(lengths, reverse=True)}
            for causal in (False, True):
                q, k, v = (torch.randn(TOKENS, nheads, headdim, device="cuda", dtype=torch.bfloat16)
                           for _ in range(3))
                scale = headdim**-0.5
                flops = sum(attention_flops(1, nheads, n, n, headdim, headdim, causal=causal, direction="fwd")
                            for n in lengths)
                calls = {"native_varlen": functools.partial(forward, q, k, v, scale, causal, packed(lengths))}
                for name, ls in orders.items():
                    for deal in ("dynamic", "static"):
                        calls[DEAL_NAMES[name, deal]] = functools.partial(forward, q, k, v, scale, causal, packed(ls),
                                                                          varlen_deal=deal)
                for variant in args.variants:
                    calls[f"dynamic_{variant}"] = functools.partial(forward, q, k, v, scale, causal, packed(lengths),
                                                                    variant=variant, varlen_deal="dynamic")
                if len(set(lengths)) == 1:
                    q4, k4, v4 = (t.view(len(lengths), lengths[0], *t.shape[1:]) for t in (q, k, v))
                    calls["native_dense"] = functools.partial(forward, q4, k4, v4, scale, causal)
                samples = {m: [] for m in calls}
                for _ in range(args.rounds):
                    for m, c in calls.items():
                        samples[m].append(time_ms([c], args.iters, 1))
                tflops = {m: flops / statistics.median(s) / 1e9 for m, s in samples.items()}
                tile = (128, 128) if causal and max(lengths) <= 1024 else TILES[headdim]
                model = {m: simulated_static_over_balanced(ls, nheads, tile, causal, sms) for m, ls in orders.items()}
                rows.append(dict(headdim=headdim, case=case, causal=causal, sequences=len(lengths), tflops=tflops,
                                 simulated_over_balanced=model, samples_ms=samples))
                print(headdim, case, causal, {m: round(t, 1) for m, t in tflops.items()},
                      {m: round(r, 3) for m, r in model.items()}, file=sys.stderr, flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--headdims", nargs="+", type=int, default=[64, 128, 256])
    parser.add_argument("--cases", nargs="+", default=["2048", "mixed", "short"])
    parser.add_argument("--variants", nargs="*", default=[], choices=["l2_sections", "one_section"],
                        help="also time the dynamic deal in these forward variants' deal orders (causal calls)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    rows = rows_for(args)
    if args.json:
        Path(args.json).write_text(json.dumps(dict(device=torch.cuda.get_device_name(), rows=rows), indent=1))
    print("| d | lengths | causal | auto | dynamic | static | dynamic / static | sorted: dynamic, static | dense | "
          "model: static / balanced (drawn, sorted) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        t, m = r["tflops"], r["simulated_over_balanced"]
        print(f"| {r['headdim']} | {r['case']} ({r['sequences']}) | {'yes' if r['causal'] else 'no'} | "
              f"{t['native_varlen']:.1f} | {t['varlen_dynamic']:.1f} | {t['varlen_static']:.1f} | "
              f"{t['varlen_dynamic'] / t['varlen_static']:.3f} | "
              f"{t['varlen_sorted']:.1f}, {t['static_sorted']:.1f} | {t.get('native_dense', float('nan')):.1f} | "
              f"{m['native_varlen']:.3f}, {m['varlen_sorted']:.3f} |")
    for r in rows:
        extra = {name: round(t, 1) for name, t in r["tflops"].items() if name.startswith("dynamic_")}
        if extra:
            print(r["headdim"], r["case"], "causal" if r["causal"] else "non-causal", extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
