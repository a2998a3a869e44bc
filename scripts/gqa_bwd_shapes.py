"""GQA / MQA backward at the shapes models train with: fa3nn with auto's parts (hopper_bwd.kv_parts) and with each
group in one tile (KV_PARTS 1), against cuDNN (SDPA, enable_gqa) and against the same call as MHA (K / V expanded to
every query head beforehand, no copies timed: the same FLOPs).

The native backward runs one CTA per (key block, K/V head, batch) and walks every query head of the group in it
(kernels/hopper/flash_bwd.cuh): with few K/V heads (MQA, or GQA under tensor parallelism: Llama-3-70B's 64 / 8 heads
on 8 GPUs is 8 / 1 per GPU) and one sequence, that is fewer CTAs than SMs, and under a causal mask block 0's CTA is
the whole makespan. scripts/model_bwd_gqa_parts.py (list scheduling on 132 SMs) gives 0.25 / 0.48 of the SMs' time
busy for 8 / 1 heads at 8k causal / non-causal, 0.52 for 32 / 8 heads at one 2k causal sequence. Backward only (bf16,
out and lse from the forward), TFLOP/s from fa3nn.metrics.attention_flops over the query heads, medians of CUDA-event
batches.

    python scripts/gqa_bwd_shapes.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import time_ms  # noqa: E402
from model_bwd_gqa_parts import SHAPES, busy_share, tiles_of  # noqa: E402

from fa3nn import flash_attn_func  # noqa: E402
from fa3nn.backends import hopper_bwd  # noqa: E402
from fa3nn.metrics import attention_flops  # noqa: E402


def backward_call(q, k, v, causal, kind):
    dout = torch.randn_like(q)
    if kind in ("fa3nn", "whole"):  # auto's parts (hopper_bwd.kv_parts), or each group in one tile (KV_PARTS 1)
        out = flash_attn_func(q, k, v, causal=causal)
        parts = "auto" if kind == "fa3nn" else 1

        def call():
            kept, hopper_bwd.KV_PARTS = hopper_bwd.KV_PARTS, parts
            try:
                return torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
            finally:
                hopper_bwd.KV_PARTS = kept
        return call
    if kind == "mha":  # K / V expanded beforehand (not timed): the same FLOPs as MHA, no group sum
        group = q.shape[2] // k.shape[2]
        kh, vh = (x.detach().repeat_interleave(group, dim=2).requires_grad_() for x in (k, v))
        out = flash_attn_func(q, kh, vh, causal=causal)
        return lambda: torch.autograd.grad(out, (q, kh, vh), dout, retain_graph=True)
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        out = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, enable_gqa=True).transpose(1, 2)
    return lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)


def _cell(x) -> str:
    return f"{x:.1f}" if x else "-"


def _ratio(a, b) -> str:
    return f"{a / b:.2f}" if a and b else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iters", type=int, default=8)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    rows = []
    for name, batch, seqlen, nheads_kv, group, headdim in SHAPES:
        nheads = nheads_kv * group
        for causal in (False, True):
            torch.manual_seed(0)
            q = torch.randn(batch, seqlen, nheads, headdim, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            k, v = (torch.randn(batch, seqlen, nheads_kv, headdim, device="cuda", dtype=torch.bfloat16,
                                requires_grad=True) for _ in range(2))
            flops = attention_flops(batch, nheads, seqlen, seqlen, headdim, causal=causal, direction="bwd")
            row = dict(name=name, batch=batch, seqlen=seqlen, nheads=nheads, nheads_kv=nheads_kv, headdim=headdim,
                       causal=causal)
            key_blocks = batch * -(-seqlen // hopper_bwd.KEY_BLOCK_ROWS[headdim])
            sms = torch.cuda.get_device_properties(0).multi_processor_count
            row["parts"] = hopper_bwd.kv_parts(group, nheads_kv, key_blocks, causal, sms)
            block = hopper_bwd.KEY_BLOCK_ROWS[headdim]
            row["model_busy"] = {p: busy_share(tiles_of(batch, seqlen, nheads_kv, group, causal, p, block), sms)
                                 for p in (1, row["parts"])}
            for kind in ("fa3nn", "whole", "mha", "cudnn"):
                try:
                    ms = time_ms([backward_call(q, k, v, causal, kind)], args.iters, args.reps)
                    row[kind] = flops / ms / 1e9
                except Exception as error:  # cuDNN may refuse a shape: say so, keep the others
                    row[kind] = None
                    row[kind + "_error"] = f"{type(error).__name__}: {str(error)[:160]}"
            rows.append(row)
            if args.json:
                args.json.write_text(json.dumps(rows, indent=1))
    print("| shape | causal | parts | fa3nn (auto parts) | whole groups | as MHA | cuDNN | auto / whole (model) | "
          "auto / MHA | auto / cuDNN | whole / cuDNN |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        f, w, m, c = r["fa3nn"], r["whole"], r["mha"], r["cudnn"]
        busy = r["model_busy"]
        model = f"{busy[r['parts']] / busy[1]:.2f}"
        print(f"| {r['name']} | {'yes' if r['causal'] else 'no'} | {r['parts']} | {_cell(f)} | {_cell(w)} | "
              f"{_cell(m)} | {_cell(c)} | {_ratio(f, w)} ({model}) | {_ratio(f, m)} | {_ratio(f, c)} | "
              f"{_ratio(w, c)} |")


if __name__ == "__main__":
    main()
