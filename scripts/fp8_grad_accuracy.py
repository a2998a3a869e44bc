"""Gradients of FP8-forward training against fp64, by the recipes' backward_from (fa3nn/fp8/backward.py's table).

For each score spread (Q and K scaled so that softmax_scale * q.k has standard deviation `std`), one causal call
through the public API: the bf16 path, then fp8=PerTileScaling(backward_from=...) for "quantized" and "inputs";
SQNR in dB of out, dq, dk, dv against fp64 autograd (scaled_dot_product_attention in float64). On the CPU the FP8
forward is the emulation of the kernels; on a GPU the kernels (backend auto).

    python scripts/fp8_grad_accuracy.py                        # CPU: 256 keys, head dim 128, std 1 2 4 16
    python scripts/fp8_grad_accuracy.py --seqlen 2048 --json out.json   # on a GPU
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

import fa3nn
from fa3nn.fp8.scaling import sqnr_db

PATHS = ("bf16", "quantized", "inputs")


def fp64_gradients(q, k, v, dout):
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    out = torch.nn.functional.scaled_dot_product_attention(*(t.transpose(1, 2) for t in leaves), is_causal=True)
    out = out.transpose(1, 2)
    return out.detach(), torch.autograd.grad(out, leaves, dout.double())


def measure(path: str, q, k, v, dout, ref_out, ref_grads) -> list[float]:
    fp8 = None if path == "bf16" else fa3nn.PerTileScaling(backward_from=path)
    out = fa3nn.flash_attn_func(q, k, v, causal=True, fp8=fp8)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    return [sqnr_db(out, ref_out)] + [sqnr_db(g, r) for g, r in zip(grads, ref_grads)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seqlen", type=int, default=256)
    parser.add_argument("--headdim", type=int, default=128)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--stds", type=float, nargs="+", default=[1, 2, 4, 16])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    shape = (1, args.seqlen, args.heads, args.headdim)
    rows = []
    for std in args.stds:
        samples = {path: [] for path in PATHS}
        for seed in range(args.seeds):
            torch.manual_seed(seed)
            q, k = ((torch.randn(shape, device=device) * std**0.5).to(torch.bfloat16).requires_grad_()
                    for _ in range(2))
            v = torch.randn(shape, device=device).to(torch.bfloat16).requires_grad_()
            dout = torch.randn(shape, device=device).to(torch.bfloat16)
            ref_out, ref_grads = fp64_gradients(q, k, v, dout)
            for path in PATHS:
                samples[path].append(measure(path, q, k, v, dout, ref_out, ref_grads))
        for path in PATHS:
            medians = [statistics.median(column) for column in zip(*samples[path])]
            worst = [min(column) for column in zip(*samples[path])]
            rows.append(dict(std=std, path=path, sqnr_db=dict(zip(("out", "dq", "dk", "dv"), medians)),
                             worst_db=dict(zip(("out", "dq", "dk", "dv"), worst))))
    meta = dict(device=torch.cuda.get_device_name() if device == "cuda" else "cpu (FP8 emulation)",
                torch=torch.__version__, shape=shape, causal=True, seeds=args.seeds)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(meta=meta, rows=rows), f, indent=1)
    print(meta)
    print("| score std | path | out dB | dq dB | dk dB | dv dB | worst dq dB |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        db = r["sqnr_db"]
        print(f"| {r['std']:g} | {r['path']} | {db['out']:.1f} | {db['dq']:.1f} | {db['dk']:.1f} | {db['dv']:.1f} | "
              f"{r['worst_db']['dq']:.1f} |")


if __name__ == "__main__":
    main()
