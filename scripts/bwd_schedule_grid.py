"""The native backward's CTA schedules over causal shapes from few tiles to the paper's, MHA and GQA: the data for
auto's rule (kernels/hopper/flash_bwd_launch.cuh use_persistent_bwd and the grid order). s50a (H100) measured one
CTA per tile with key blocks outermost at 1.66x auto for 8 heads x one causal 8k sequence (512 tiles, auto runs
persistent), but 0.98x at 32 heads x one 2k sequence (also 512 tiles: shorter ones), and whole-group GQA causal in
its key-blocks-outer order at 0.54x the same call as MHA (the llama-1b recipe's 8 x 4k, 32 / 8 heads d64; 0.98x on
an H200 in s49a). Per shape: launch with auto's schedule, then one CTA per tile and persistent, each in both grid
orders and key blocks outermost per batch (key_blocks_outer_per_batch: the CTAs in flight read one batch's Q / dO);
GQA shapes with whole groups and with auto's parts. Whole backward (preprocess, main, postprocess), bf16,
rounds interleaved, TFLOP/s; cuDNN (SDPA) beside it. Causal by default; --causal no / both for the non-causal calls
(s50a, the few-tile shapes: the schedules within -3..+1.4% of each other there).

    python scripts/bwd_schedule_grid.py --json out.json [--rounds 3] [--causal yes|no|both] [--shapes 1 0 3]
        [--parts 2 4]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import time_ms  # noqa: E402

from fa3nn.backends import hopper_bwd  # noqa: E402
from fa3nn.backends.hopper import launch as forward  # noqa: E402
from fa3nn.metrics import attention_flops  # noqa: E402

# (batch, seqlen, query heads, K/V heads, head dim).
SHAPES = [  # the most telling first: a short run (timeout) keeps the rows done so far
    (1, 8192, 8, 8, 128), (8, 4096, 32, 8, 64), (2, 8192, 16, 16, 128), (8, 2048, 16, 16, 128),
    (1, 2048, 32, 32, 128), (1, 8192, 28, 4, 128), (2, 4096, 32, 8, 128), (1, 16384, 16, 16, 128),
    (1, 8192, 16, 16, 128), (4, 4096, 16, 16, 128), (2, 4096, 8, 8, 128), (1, 8192, 32, 32, 128),
    (1, 16384, 8, 8, 128), (1, 4096, 32, 32, 128), (1, 2048, 64, 64, 128), (1, 8192, 16, 16, 64),
    (2, 8192, 32, 32, 64), (8, 2048, 32, 32, 64), (1, 8192, 8, 8, 256), (2, 8192, 8, 8, 256), (1, 8192, 32, 8, 128),
    (1, 2048, 32, 8, 128), (1, 8192, 8, 1, 128), (2, 8192, 16, 1, 128), (1, 8192, 7, 1, 128),
    # MHA one CTA per tile over few pairs (s50c / s51a: outermost 1.10x at d64 1 x 8k x 16; the schedule model,
    # model_bwd_gqa_parts.py's per_tile, puts outermost / innermost at 1.23 / 1.11 / 1.00 / 1.00 / 1.23 / 1.56 here)
    (1, 8192, 8, 8, 64), (2, 8192, 8, 8, 64), (1, 16384, 16, 16, 64), (1, 16384, 8, 8, 64), (1, 4096, 8, 8, 256),
    (1, 2048, 8, 8, 256),
    # the paper's d256 causal 2k (8 x 2k x 8 heads), below cuDNN on the H100 (0.95x, s53a / s53b)
    (8, 2048, 8, 8, 256),
    # d128 causal MHA at pair counts where the persistent static deal is modelled far from per tile's list
    # scheduling (model_bwd_gqa_parts.py per_tile / persistent, innermost; per tile x persistent 1.17 / 1.11 / 1.13 /
    # 1.05 / 0.94 / 0.95 in this order; the paper's 2 x 8k x 16, shape 2, 0.955)
    (1, 8192, 24, 24, 128), (1, 8192, 40, 40, 128), (3, 8192, 16, 16, 128), (1, 4096, 48, 48, 128),
    (5, 2048, 16, 16, 128), (6, 4096, 16, 16, 128),
    # d64 causal MHA (persistent up to 4096 rows; the deal rule is d128's only): per tile x persistent modelled 1.12 /
    # 1.04 / 1.05 here and 0.89 at one 2k x 24 (the control)
    (1, 4096, 20, 20, 64), (1, 4096, 24, 24, 64), (3, 4096, 16, 16, 64), (1, 2048, 24, 24, 64),
    # d64 causal MHA past kOuterPairsMax (16) pairs: key blocks outermost ran 1.14-1.31x auto at 20-24 pairs (s55b);
    # where does it stop paying (d128's L2 loss began at 32 pairs, s50c)? 32 / 48 / 64 / 128 pairs at 4k and 2k (the
    # paper's d64 4k is 4 x 4k x 32, 2k is 8 x 2k x 32: shape 17), and one CTA per tile at 8k (24 / 32 pairs)
    (1, 4096, 32, 32, 64), (1, 4096, 48, 48, 64), (2, 4096, 32, 32, 64), (4, 4096, 32, 32, 64),
    (1, 2048, 32, 32, 64), (1, 2048, 48, 48, 64), (2, 2048, 32, 32, 64), (4, 2048, 32, 32, 64),
    (1, 8192, 24, 24, 64), (1, 8192, 32, 32, 64),
    # d64 one CTA per tile at 8k between 16 and 32 pairs (row 50, 24 pairs: key blocks outermost 1.05-1.06x auto in
    # s56a's one run; rows 15 and 51 are the 16 and 32)
    (1, 8192, 20, 20, 64), (1, 8192, 28, 28, 64),
]
SCHEDULES = {
    "auto": {},
    "tile_inner": dict(schedule="per_tile", grid_order="key_blocks_inner"),
    "tile_outer": dict(schedule="per_tile", grid_order="key_blocks_outer"),
    "pers_inner": dict(schedule="persistent", grid_order="key_blocks_inner"),
    "pers_outer": dict(schedule="persistent", grid_order="key_blocks_outer"),
    "tile_batch": dict(schedule="per_tile", grid_order="key_blocks_outer_per_batch"),
    "pers_batch": dict(schedule="persistent", grid_order="key_blocks_outer_per_batch"),
}


# The schedules timed for each of --parts' explicit part counts (GQA shapes whose group it divides).
PART_SCHEDULES = ("auto", "tile_inner", "tile_batch")


def modes(group: int, extra_parts: tuple[int, ...] = ()) -> dict[str, dict]:
    """Every schedule with auto's parts; GQA also every schedule with whole groups (kv_parts 1) and PART_SCHEDULES
    with each of `extra_parts` that divides the group ("p2 tile_batch": 2 parts, one CTA per tile, per batch)."""
    parts = {"": "auto"} if group == 1 else {"": "auto", "whole ": 1}
    out = {prefix + name: dict(kw, kv_parts=p) for prefix, p in parts.items() for name, kw in SCHEDULES.items()}
    for p in extra_parts:
        if group > 1 and p > 1 and group % p == 0:
            out.update({f"p{p} {name}": dict(SCHEDULES[name], kv_parts=p) for name in PART_SCHEDULES})
    return out


def _calls(batch: int, seqlen: int, nheads: int, nheads_kv: int, headdim: int, causal: bool, sms: int,
           extra_parts: tuple[int, ...] = ()) -> dict:
    """One backward call per mode (modes) and cuDNN's, over the same inputs."""
    group = nheads // nheads_kv
    q = torch.randn(batch, seqlen, nheads, headdim, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(batch, seqlen, nheads_kv, headdim, device="cuda", dtype=torch.bfloat16) for _ in "kv")
    scale = headdim**-0.5
    out, lse = forward(q, k, v, scale, causal)
    dout = torch.randn_like(out)
    inputs = (dout, q, k, v, out, lse, scale, causal)
    auto_parts = hopper_bwd.kv_parts(group, nheads_kv, hopper_bwd._key_blocks(k, None), causal, sms)
    calls = {}
    for mode, kw in modes(group, extra_parts).items():
        kw = dict(kw, kv_parts=auto_parts if kw["kv_parts"] == "auto" else 1)  # "auto": backward's choice
        calls[mode] = (lambda kw=kw: hopper_bwd.launch(*inputs, **kw))
    qt, kt, vt = (x.detach().transpose(1, 2).requires_grad_() for x in (q, k, v))
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        ref = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, enable_gqa=group > 1)
    dref = dout.transpose(1, 2)
    calls["cudnn"] = lambda: torch.autograd.grad(ref, (qt, kt, vt), dref, retain_graph=True)
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iters", type=int, default=6)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--causal", choices=("yes", "no", "both"), default="yes")
    parser.add_argument("--shapes", type=int, nargs="+", default=None,
                        help="indices into SHAPES to run, in this order (default: all)")
    parser.add_argument("--parts", type=int, nargs="+", default=(),
                        help="GQA shapes also run PART_SCHEDULES with these kv_parts (divisors of the group)")
    args = parser.parse_args()
    shapes = SHAPES if args.shapes is None else [SHAPES[i] for i in args.shapes]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    masks = {"yes": (True,), "no": (False,), "both": (True, False)}[args.causal]
    rows = []
    for (batch, seqlen, nheads, nheads_kv, headdim), causal in itertools.product(shapes, masks):
        calls = _calls(batch, seqlen, nheads, nheads_kv, headdim, causal, sms, tuple(args.parts))
        flops = attention_flops(batch, nheads, seqlen, seqlen, headdim, causal=causal, direction="bwd")
        samples = {mode: [] for mode in calls}
        for _ in range(args.rounds):
            for mode, call in calls.items():
                samples[mode].append(time_ms([call], args.iters, 1))
        ms = {mode: statistics.median(s) for mode, s in samples.items()}
        rows.append(dict(batch=batch, seqlen=seqlen, nheads=nheads, nheads_kv=nheads_kv, headdim=headdim, sms=sms,
                         causal=causal, ms=ms, samples=samples, tflops={m: flops / t / 1e9 for m, t in ms.items()}))
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1))
    print("| shape | causal | tiles | auto | best | best x auto | best x cuDNN | auto x cuDNN | others x auto |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        t = r["tflops"]
        ours = {m: x for m, x in t.items() if m != "cudnn"}
        best = max(ours, key=ours.get)
        tiles = r["batch"] * r["nheads_kv"] * -(-r["seqlen"] // hopper_bwd.KEY_BLOCK_ROWS.get(r["headdim"], 128))
        others = ", ".join(f"{m} {x / t['auto']:.2f}" for m, x in ours.items() if m != "auto")
        print(f"| {r['batch']} x {r['seqlen']}, {r['nheads']} / {r['nheads_kv']}, d{r['headdim']} | "
              f"{'yes' if r['causal'] else 'no'} | {tiles} | "
              f"{t['auto']:.0f} | {best} {t[best]:.0f} | {t[best] / t['auto']:.2f} | {t[best] / t['cudnn']:.2f} | "
              f"{t['auto'] / t['cudnn']:.2f} | {others} |")


if __name__ == "__main__":
    main()
