"""The native forward's causal deals at (batch, heads) counts off the paper's: the default (one (batch, head) pair per
longest-first section, dealt boustrophedon, up to 8k at d128) against one longest-first section over every tile
(variant one_section) and L2-sized sections (l2_sections), with cuDNN beside them, and each deal's per-CTA work
balance from scripts/simulate_causal_balance.py (max / mean, 132 SMs). The paper's shapes (batch x seqlen = 16384,
16 heads at d128) give the one-pair deal 32 pairs of whole ramps per round pair; one sequence of 8k over 8 / 16 / 24
heads (tensor-parallel shards, fine-tuning at batch 1) gives it 1.27-1.76 in the simulation, one section 1.00-1.03.
bf16, causal, rounds interleaved; the deals' outputs must agree bitwise (they do in test_causal_deals_agree_bitwise).

    python scripts/fwd_deal_shapes.py [--headdims 128 64] [--rounds 5] [--compare before=/tmp/main.so] --json out.json

--compare NAME=PATH times another build's default deal beside this one's (main's library against a change of the
default deal), its output bitwise against this build's default too.

--fp8: the FP8 forward (d128, per-tile e4m3 inputs, 128-row Q / default_block_k K/V descale tiles) instead, whose
one-pair deal reaches 4k only (flash_fwd_launch.cuh use_one_pair_sections; the few-pair rule covers FP8 since s56a):
one 4k / 2k sequence over 8-32 heads, the paper's 4 x 4k and 8 x 2k as controls; cuDNN's bf16 forward beside it for
scale (not FP8's peer). Its simulated balance is the "fp8-128" tiles' (128 x 256).
"""

from __future__ import annotations

import argparse
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
from simulate_causal_balance import ONE_PAIR, SECTIONED, imbalance  # noqa: E402

from fa3nn.backends import hopper_build  # noqa: E402
from fa3nn.backends.hopper import launch  # noqa: E402
from fa3nn.backends.hopper_fp8 import fp8_forward  # noqa: E402
from fa3nn.fp8.key_blocks import default_block_k  # noqa: E402
from fa3nn.fp8.operands import transpose_v  # noqa: E402
from fa3nn.fp8.quantize import quantize_qkv_tensors  # noqa: E402
from fa3nn.masks import Window  # noqa: E402
from fa3nn.metrics import attention_flops  # noqa: E402

# (batch, seqlen, heads): few pairs at 8k / 4k first, then the paper's d128 8k / 2k shapes (the controls)
SHAPES = [(1, 8192, 8), (1, 8192, 16), (1, 8192, 24), (1, 4096, 16), (1, 4096, 24), (2, 8192, 16), (8, 2048, 16)]
# --fp8: its one-pair deal's lengths (up to 4k at d128), few pairs first, then the paper's 4k / 2k shapes
FP8_SHAPES = [(1, 4096, 8), (1, 4096, 16), (1, 4096, 24), (1, 2048, 16), (1, 2048, 32), (4, 4096, 16), (8, 2048, 16)]
DEALS = {"default": "full", "one_section": "one_section", "l2_sections": "l2_sections"}


def simulated(headdim: int | str, seqlen: int, num_bh: int) -> dict[str, float]:
    """Each deal's max / mean per-CTA work as flash_fwd_launch.cuh deals it at this length (simulate_causal_balance's
    main()): one_pair the default before 2026-12-07 (one-pair sections where use_one_pair_sections), one_section,
    l2_sections (L2-sized round-robin sections where use_l2_sections); else one boustrophedon section."""
    one = imbalance(seqlen, headdim, None, True, num_bh=num_bh)
    return {"one_pair": imbalance(seqlen, headdim, "one", True, num_bh=num_bh) if ONE_PAIR[headdim](seqlen) else one,
            "one_section": one,
            "l2_sections": imbalance(seqlen, headdim, "l2", False, num_bh=num_bh) if SECTIONED[headdim](seqlen)
            else one}


def measure(headdim: int, batch: int, seqlen: int, heads: int, rounds: int, iters: int, others: dict,
            fp8: bool = False) -> dict:
    """One shape: each deal's output against the default's (bitwise) and TFLOP/s, cuDNN's, the simulated balance;
    `others` (name -> loaded library) run their default deal; `fp8`: the FP8 forward's deals."""
    q, k, v = (torch.randn(batch, seqlen, heads, headdim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    scale = headdim ** -0.5
    if fp8:
        block_k = default_block_k(headdim)
        quantized = quantize_qkv_tensors(q, k, v, 128, block_k)
        vt8 = transpose_v(quantized.v)

        def deal(variant: str, library=None):
            return lambda: fp8_forward(quantized.q, quantized.k, vt8, quantized.q_descale, quantized.k_descale,
                                       quantized.v_descale, 128, block_k, scale, Window(-1, 0), variant=variant,
                                       library=library)
    else:
        def deal(variant: str, library=None):
            return lambda: launch(q, k, v, scale, True, variant=variant, library=library)

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(qt, kt, vt, is_causal=True, scale=scale)

    calls = {name: deal(variant) for name, variant in DEALS.items()}
    calls.update({name: deal("full", library) for name, library in others.items()})
    outs = {name: call()[0] for name, call in calls.items()}
    agree = all(torch.equal(outs["default"], o) for o in outs.values())
    calls["cudnn"] = cudnn
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            samples[name].append(time_ms([call], iters, 3))
    flops = attention_flops(batch, heads, seqlen, seqlen, headdim, causal=True)
    ms = {name: statistics.median(s) for name, s in samples.items()}
    return dict(headdim=headdim, batch=batch, seqlen=seqlen, heads=heads, bitwise=agree, ms=ms, samples=samples,
                tflops={name: flops / (t * 1e-3) / 1e12 for name, t in ms.items()},
                fp8=fp8, simulated=simulated("fp8-128" if fp8 else headdim, seqlen, batch * heads))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--headdims", type=int, nargs="+", default=None, help="default 128 64 (--fp8: 128)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--compare", nargs="*", default=[], metavar="NAME=PATH", help="other builds' default deal")
    parser.add_argument("--fp8", action="store_true", help="the FP8 forward's deals (head dim 128 only)")
    args = parser.parse_args()
    if args.headdims is None:
        args.headdims = [128] if args.fp8 else [128, 64]
    if args.fp8 and args.headdims != [128]:
        parser.error(f"--fp8 measures head dim 128 only (the simulation's fp8-128 tiles); got --headdims "
                     f"{args.headdims}: pass --headdims 128")
    others = {}
    for item in args.compare:
        name, sep, path = item.partition("=")
        if not sep or name in DEALS or name == "cudnn":
            parser.error(f"--compare expects NAME=PATH with a name other than {list(DEALS)} and cudnn, got {item!r}")
        others[name] = hopper_build.load(Path(path))
    rows = []
    print(f"| {'FP8 ' if args.fp8 else ''}d | batch x seqlen x heads | default TFLOP/s | one_section x default | "
          "l2_sections x default | "
          + "".join(f"{name} x default | " for name in others)
          + "cuDNN x default | simulated max / mean: one pair, one section, L2 |")
    print("|---|---|---|---|---|" + "---|" * len(others) + "---|---|")
    for headdim in args.headdims:
        for batch, seqlen, heads in FP8_SHAPES if args.fp8 else SHAPES:
            row = measure(headdim, batch, seqlen, heads, args.rounds, args.iters, others, args.fp8)
            rows.append(row)
            tflops, sim = row["tflops"], row["simulated"]
            base = tflops["default"]
            print(f"| {headdim} | {batch} x {seqlen} x {heads}{'' if row['bitwise'] else ' (DEALS DIFFER)'} | "
                  f"{base:.1f} | {tflops['one_section'] / base:.2f} | {tflops['l2_sections'] / base:.2f} | "
                  + "".join(f"{tflops[name] / base:.2f} | " for name in others)
                  + f"{tflops['cudnn'] / base:.2f} | {sim['one_pair']:.2f}, {sim['one_section']:.2f}, "
                  f"{sim['l2_sections']:.2f} |", flush=True)
            if args.json:
                args.json.write_text(json.dumps(dict(gpu=torch.cuda.get_device_name(), rows=rows), indent=1))


if __name__ == "__main__":
    main()
