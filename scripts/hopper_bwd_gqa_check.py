"""Device check of the native Hopper backward's in-kernel GQA/MQA (hopper_bwd.NATIVE_GQA's path: one CTA per K/V head
walks its group's query heads, kernels/hopper/flash_bwd.cuh BwdQueryWalk) against the expansion path it would replace
(repeat_interleave K/V, MHA kernel, fp32 group sums) and cuDNN, in one device call.

1. Errors: each of dq, dk, dv of the in-kernel path by the error-ratio rule (fa3nn.testing.error_ratio) against the
   fp32 / bf16 reference pair, smallest case first, with max |error| / max |ref| beside it; plus dK/dV bitwise equal
   run to run (they are summed in registers, no atomics).
2. Timing, backward only, bf16: head dims 128 and 64, seqlen 2048 and 8192, causal and not, 16 query heads on 4 and
   on 2 K/V heads, batch * seqlen = 16384 tokens; out/lse from the native forward. Per shape, before timing, the
   in-kernel gradients are compared with the expansion path's and cuDNN's (max |diff| / max |other| <= 3e-2 each)
   and, causal, its dK/dV in the two grid orders bitwise; otherwise the in-kernel columns are not timed. Columns:
   - in-kernel: `launch` on the K/V heads (default variant; auto grid order: key blocks outermost when causal);
   - in-kernel, MHA grid order (causal only): grid_order="key_blocks_inner" (hopper_bwd.GRID_ORDERS);
   - expansion: `backward` with NATIVE_GQA off, what dispatch runs today, copies and group sums included;
   - MHA same FLOPs: the MHA kernel on K/V already expanded to 16 heads (no copies: the in-kernel path's ceiling);
   - MHA, outer order (causal only): the same in the key-blocks-outermost order (scripts/model_bwd_grid_order.py
     predicts it helps causal MHA too);
   - cuDNN: SDPA with enable_gqa=True; if cuDNN refuses it, the call on K/V expanded inside the autograd graph, so
     its backward includes the group sum (the JSON says which).
   TFLOP/s from fa3nn.metrics.attention_flops with the query heads. Ratios last: in-kernel / expansion, in-kernel /
   MHA, in-kernel / cuDNN.
Writes $OUT/hopper_bwd_gqa_check.json (else benchmarks/results/) after every shape and prints a table last.

    FA3NN_HOPPER_LIB=build/libfa3nn_hopper.so python scripts/hopper_bwd_gqa_check.py
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import TOKENS  # noqa: E402
from hopper_bwd_device_check import check_gradients, params, rel_error, time_calls  # noqa: E402

from fa3nn.backends import hopper_bwd  # noqa: E402
from fa3nn.backends.hopper import launch as hopper_forward  # noqa: E402
from fa3nn.metrics import attention_flops  # noqa: E402

CASES = [  # (headdim, seqlen_q, seqlen_k, causal, nheads, nheads_kv), smallest first
    (128, 128, 128, False, 8, 2), (64, 1, 1, True, 4, 1), (64, 239, 1, True, 6, 2), (128, 113, 203, True, 3, 1),
    (128, 511, 1537, True, 8, 2), (64, 1537, 511, True, 8, 1), (128, 1024, 1024, False, 16, 4),
    (64, 1024, 1024, True, 16, 2),
]
NHEADS = 16
AGREE = 3e-2  # max |in-kernel - other| / max |other| per gradient at the timed shapes (bf16 sums in other orders)


def _inputs(batch, seqlen_q, seqlen_k, nheads, nheads_kv, headdim):
    q = torch.randn(batch, seqlen_q, nheads, headdim, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(batch, seqlen_k, nheads_kv, headdim, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    return q, k, v, torch.randn_like(q)


def errors(headdim, seqlen_q, seqlen_k, causal, nheads, nheads_kv) -> dict:
    q, k, v, dout = _inputs(2, seqlen_q, seqlen_k, nheads, nheads_kv, headdim)
    p = params(headdim, causal)
    out, lse = hopper_forward(q, k, v, p.softmax_scale, causal)
    grads = hopper_bwd.launch(dout, q, k, v, out, lse, p.softmax_scale, causal)
    again = hopper_bwd.launch(dout, q, k, v, out, lse, p.softmax_scale, causal)
    torch.cuda.synchronize()
    row = {"case": f"d{headdim} {seqlen_q}x{seqlen_k} {'causal' if causal else 'full'} {nheads}q/{nheads_kv}kv",
           "deterministic_dkdv": bool(torch.equal(grads[1], again[1]) and torch.equal(grads[2], again[2]))}
    row["ok"] = row["deterministic_dkdv"]
    return check_gradients(row, q, k, v, dout, causal, grads)


def timing(headdim, seqlen, causal, nheads_kv, iters, reps) -> dict:
    batch, group = TOKENS // seqlen, NHEADS // nheads_kv
    q, k, v, dout = _inputs(batch, seqlen, seqlen, NHEADS, nheads_kv, headdim)
    p = params(headdim, causal)
    out, lse = hopper_forward(q, k, v, p.softmax_scale, causal)
    k_full, v_full = (t.repeat_interleave(group, dim=2) for t in (k, v))

    def in_kernel():
        return hopper_bwd.launch(dout, q, k, v, out, lse, p.softmax_scale, causal)

    def expansion():  # backward() with NATIVE_GQA off (main sets it): dispatch's GQA path today
        return hopper_bwd.backward(dout, q, k, v, out, lse, None, p, None)

    def mha():
        return hopper_bwd.launch(dout, q, k_full, v_full, out, lse, p.softmax_scale, causal)

    def in_kernel_inner():
        return hopper_bwd.launch(dout, q, k, v, out, lse, p.softmax_scale, causal, grid_order="key_blocks_inner")

    def mha_outer():
        return hopper_bwd.launch(dout, q, k_full, v_full, out, lse, p.softmax_scale, causal,
                                 grid_order="key_blocks_outer")

    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    qt, kt, vt = (x.transpose(1, 2) for x in leaves)
    row = {"headdim": headdim, "seqlen": seqlen, "causal": causal, "nheads": NHEADS, "nheads_kv": nheads_kv,
           "batch": batch}
    try:
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            sdpa_out = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, enable_gqa=True)
        row["cudnn_mode"] = "enable_gqa"
    except RuntimeError as exc:
        row["cudnn_mode"] = f"expanded in graph ({str(exc).splitlines()[0][:80]})"
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            sdpa_out = F.scaled_dot_product_attention(qt, kt.repeat_interleave(group, dim=1),
                                                      vt.repeat_interleave(group, dim=1), is_causal=causal)
    sdpa_dout = dout.transpose(1, 2)

    def cudnn():
        return torch.autograd.grad(sdpa_out, leaves, sdpa_dout, retain_graph=True)

    # Correctness first: the in-kernel path against the expansion path and cuDNN, per gradient.
    mine, theirs, peer = in_kernel(), expansion(), cudnn()
    row["agree"] = {f"{name} vs {other}": rel_error(a, b)
                    for other, grads in (("expansion", theirs), ("cudnn", peer))
                    for name, a, b in zip(("dq", "dk", "dv"), mine, grads)}
    # The grid order only maps CTAs to tiles: dK/dV bitwise equal in the other order.
    other_order = in_kernel_inner() if causal else None
    row["orders_equal"] = other_order is None or (torch.equal(mine[1], other_order[1])
                                                  and torch.equal(mine[2], other_order[2]))
    row["ok"] = (all(e <= AGREE for e in row["agree"].values()) and mine[1].shape == k.shape
                 and row["orders_equal"])
    calls = {"in-kernel": in_kernel, "in-kernel inner": in_kernel_inner, "expansion": expansion, "mha": mha,
             "mha outer": mha_outer, "cudnn": cudnn}
    if not causal:  # the orders differ only in the tail of a causal launch
        for name in ("in-kernel inner", "mha outer"):
            del calls[name]
            row[name] = "-"
    if not row["ok"]:
        for name in ("in-kernel", "in-kernel inner"):
            calls.pop(name, None)
            row[name] = "not timed: gradients disagree"
    flops = attention_flops(batch, NHEADS, seqlen, seqlen, headdim, causal=causal, direction="bwd")
    return time_calls(row, calls, flops, iters, reps)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=8)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    torch.manual_seed(0)
    hopper_bwd.NATIVE_GQA = False  # the expansion column; the in-kernel column calls launch on the K/V heads directly
    report = {"errors": [], "timing": [], "default_variants": hopper_bwd.DEFAULT_VARIANTS}
    out_dir = Path(os.environ.get("OUT") or Path(__file__).resolve().parents[1] / "benchmarks" / "results")
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "hopper_bwd_gqa_check.json"
    for case in CASES:
        row = errors(*case)
        report["errors"].append(row)
        print(f"{row['case']:<34} dq {row['dq']:.2e} dk {row['dk']:.2e} dv {row['dv']:.2e} "
              f"dK/dV deterministic {row['deterministic_dkdv']} {'ok' if row['ok'] else 'FAIL'}", flush=True)
    passed = all(r["ok"] for r in report["errors"])
    path.write_text(json.dumps(report, indent=1))
    for headdim in (128, 64):
        for seqlen in (2048, 8192):
            for causal in (False, True):
                for nheads_kv in (4, 2):
                    row = timing(headdim, seqlen, causal, nheads_kv, args.iters, args.reps)
                    report["timing"].append(row)
                    passed &= row["ok"]
                    print(json.dumps(row), flush=True)
                    path.write_text(json.dumps(report, indent=1))

    def cell(r, name):
        return f"{r[name]:.0f}" if isinstance(r[name], float) else str(r[name])[:30]

    def ratio(r, a, b):
        return f"{r[a] / r[b]:.2f}" if isinstance(r[a], float) and isinstance(r[b], float) else "-"

    print("\n| hdim | seqlen | causal | q/kv heads | in-kernel | in-kernel, MHA grid order | expansion | "
          "MHA same FLOPs | MHA, outer order | cuDNN (bwd TFLOP/s) | in-kernel / expansion | in-kernel / MHA | "
          "in-kernel / cuDNN |")
    print("|---" * 13 + "|")
    for r in report["timing"]:
        print(f"| {r['headdim']} | {r['seqlen']} | {'yes' if r['causal'] else 'no'} | {r['nheads']}/{r['nheads_kv']} | "
              f"{cell(r, 'in-kernel')} | {cell(r, 'in-kernel inner')} | {cell(r, 'expansion')} | {cell(r, 'mha')} | "
              f"{cell(r, 'mha outer')} | {cell(r, 'cudnn')} | "
              f"{ratio(r, 'in-kernel', 'expansion')} | {ratio(r, 'in-kernel', 'mha')} | "
              f"{ratio(r, 'in-kernel', 'cudnn')} |")
    print("correctness:", "all passed" if passed else "FAILURES above")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
