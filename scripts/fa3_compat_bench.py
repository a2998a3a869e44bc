"""What FlashAttention-3's conventions cost on the GPU (fa3nn.sinks, fa3nn.chunks, fa3nn.fp8.inputs), each against the
plain call it wraps, in one process on one GPU (bf16, batch x seqlen = 16384 tokens, 2048 / headdim heads, causal):

- sinks: flash_attn_func(..., sinks=) against without, causal and with gpt-oss's window (128, 0), forward and
  forward + backward (in the native forward's epilogue since the thirty-seventh session, one elementwise pass over out
  before; the backward's one pass over dout and out for the sinks' gradient);
- chunks: attention_chunk = seqlen (one chunk: the packing's overhead alone) and 2048 (fewer pairs) against causal;
- FP8 inputs: e4m3 q, k, v with descales (V transposed in PyTorch per call) against fp8=CurrentScaling() on the bf16
  inputs (the fused quantization pass) and the bf16 call, forward only.

    python scripts/fa3_compat_bench.py --json out.json [--headdims 64 128] [--seqlens 4096 16384] [--backend triton]
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import time_ms  # noqa: E402

import fa3nn  # noqa: E402
from fa3nn.fp8 import quantize_qkv_tensors  # noqa: E402

TOKENS, WIDTH = 16384, 2048


def _fwd_bwd(fn, leaves, dout):
    def run():
        out = fn(*leaves)
        torch.autograd.grad(out, leaves, dout)
    return run


def bench(headdim: int, seqlen: int, iters: int, reps: int, backend: str = "auto") -> dict:
    batch, nheads = TOKENS // seqlen, WIDTH // headdim
    q, k, v, dout = (torch.randn(batch, seqlen, nheads, headdim, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    sinks = torch.randn(nheads, device="cuda", requires_grad=True)
    causal = functools.partial(fa3nn.flash_attn_func, causal=True, backend=backend)
    options = {"causal": {}, "causal+sinks": dict(sinks=sinks), "window128": dict(window_size=(128, 0)),
               "window128+sinks": dict(window_size=(128, 0), sinks=sinks),
               "chunk=seqlen": dict(attention_chunk=seqlen), "chunk=2048": dict(attention_chunk=2048)}
    calls = {name: functools.partial(causal, **kwargs) for name, kwargs in options.items()}
    row = {"headdim": headdim, "seqlen": seqlen, "fwd_ms": {}, "fwd_bwd_ms": {}}
    for name, fn in calls.items():
        with torch.no_grad():
            row["fwd_ms"][name] = time_ms([lambda fn=fn: fn(q, k, v)], iters, reps)
        row["fwd_bwd_ms"][name] = time_ms([_fwd_bwd(fn, leaves, dout)], iters, reps)
    quantized = quantize_qkv_tensors(q, k, v, 0, 0)  # one scale per (sequence, head): FA3's descale granularity
    descales = [d.squeeze(-1).contiguous() for d in (quantized.q_descale, quantized.k_descale, quantized.v_descale)]
    fp8 = {
        "bf16": lambda: fa3nn.flash_attn_func(q, k, v),
        "fp8 recipe (current)": lambda: fa3nn.flash_attn_func(q, k, v, fp8=fa3nn.CurrentScaling()),
        "fp8 inputs": lambda: fa3nn.flash_attn_func(quantized.q, quantized.k, quantized.v, q_descale=descales[0],
                                                    k_descale=descales[1], v_descale=descales[2]),
    }
    with torch.no_grad():
        row["noncausal_fwd_ms"] = {name: time_ms([fn], iters, reps) for name, fn in fp8.items()}
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--headdims", nargs="+", type=int, default=[64, 128])
    parser.add_argument("--seqlens", nargs="+", type=int, default=[4096, 16384])
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--backend", default="auto", help="the backend of the sinks / window / chunk rows (triton: its "
                        "sinks in the kernel); the FP8 rows keep auto")
    args = parser.parse_args()
    rows = [bench(d, s, args.iters, args.reps, args.backend) for d in args.headdims for s in args.seqlens]
    if args.json:
        args.json.write_text(json.dumps(dict(gpu=torch.cuda.get_device_name(), rows=rows), indent=1))
    print("| d | seqlen | sinks fwd / fwd+bwd (x causal) | sinks, window 128 (x window 128) | chunk=seqlen fwd / "
          "fwd+bwd | chunk=2048 fwd / fwd+bwd | fp8 inputs / fp8 recipe / bf16 fwd ms |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        f, fb = r["fwd_ms"], r["fwd_bwd_ms"]
        ratio = [f"{f[n] / f[base]:.3f} / {fb[n] / fb[base]:.3f}" for n, base in (
            ("causal+sinks", "causal"), ("window128+sinks", "window128"), ("chunk=seqlen", "causal"),
            ("chunk=2048", "causal"))]
        p = r["noncausal_fwd_ms"]
        print(f"| {r['headdim']} | {r['seqlen']} | {' | '.join(ratio)} | {p['fp8 inputs']:.3f} / "
              f"{p['fp8 recipe (current)']:.3f} / {p['bf16']:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
