"""The native backward on sliding windows (BwdConfig::kLocal) against the Triton backward it replaces, on the same
inputs (out and lse from the Triton forward, which auto runs for windowed calls), rounds interleaved; and, as a
yardstick, the native causal backward of the same shape. TFLOP/s count the pairs each window attends
(fa3nn.metrics.attended_pairs). Shapes of the FlashAttention-3 paper (batch x seqlen = 16384 tokens, nheads x headdim
= 2048), bf16, MHA; windows causal with a left bound (Mistral's / Gemma's local layers).

    python scripts/bwd_window_ab.py --json out.json [--headdims 128 256] [--seqlens 4096 16384] [--lefts 1024 4096]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import TOKENS, WIDTH, time_ms  # noqa: E402

from fa3nn.backends import hopper_bwd  # noqa: E402
from fa3nn.backends.base import AttnParams  # noqa: E402
from fa3nn.backends.triton import launch as triton_launch  # noqa: E402
from fa3nn.masks import Window  # noqa: E402
from fa3nn.metrics import attention_flops  # noqa: E402


def measure(headdim: int, seqlen: int, left: int, args) -> dict:
    batch, nheads = TOKENS // seqlen, WIDTH // headdim
    q, k, v = (torch.randn(batch, seqlen, nheads, headdim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    scale = headdim**-0.5
    params = AttnParams(softmax_scale=scale, window=Window.from_args(True, (left, 0)), softcap=0.0,
                        deterministic=False)
    out, lse = triton_launch.forward(q, k, v, params, None)
    dout = torch.randn_like(out)
    calls = {
        "native": lambda: hopper_bwd.launch(dout, q, k, v, out, lse, scale, True, window_size=(left, 0)),
        "triton": lambda: triton_launch.backward(dout, q, k, v, out, lse, None, params, None),
        "native_causal": lambda: hopper_bwd.launch(dout, q, k, v, out, lse, scale, True),
    }
    native, ref = calls["native"](), calls["triton"]()
    diff = max((a.float() - b.float()).abs().max().item() for a, b in zip(native, ref))
    samples = {m: [] for m in calls}
    for _ in range(args.rounds):
        for m, c in calls.items():
            samples[m].append(time_ms([c], args.iters, 1))
    flops = attention_flops(batch, nheads, seqlen, seqlen, headdim, causal=True, direction="bwd", window=(left, 0))
    causal_flops = attention_flops(batch, nheads, seqlen, seqlen, headdim, causal=True, direction="bwd")
    ms = {m: statistics.median(x) for m, x in samples.items()}
    return dict(headdim=headdim, seqlen=seqlen, left=left, ms=ms, samples_ms=samples, max_abs_diff=diff,
                tflops={"native": flops / ms["native"] / 1e9, "triton": flops / ms["triton"] / 1e9,
                        "native_causal": causal_flops / ms["native_causal"] / 1e9},
                native_over_triton=statistics.median(t / n for n, t in zip(samples["native"], samples["triton"])))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--headdims", nargs="+", type=int, default=[128, 256])
    parser.add_argument("--seqlens", nargs="+", type=int, default=[4096, 16384])
    parser.add_argument("--lefts", nargs="+", type=int, default=[1024, 4096])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    rows = []
    for headdim in args.headdims:
        for seqlen in args.seqlens:
            for left in args.lefts:
                if left < seqlen:
                    rows.append(measure(headdim, seqlen, left, args))
                    print({k: v for k, v in rows[-1].items() if k != "samples_ms"}, file=sys.stderr, flush=True)
    if args.json:
        args.json.write_text(json.dumps(dict(gpu=torch.cuda.get_device_name(), rows=rows), indent=1))
    print("| d | seqlen | window (left, 0) | native TFLOP/s | triton TFLOP/s | native x triton | native causal TFLOP/s "
          "| max abs diff |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        t = r["tflops"]
        print(f"| {r['headdim']} | {r['seqlen']} | {r['left']} | {t['native']:.1f} | {t['triton']:.1f} | "
              f"{r['native_over_triton']:.2f} | {t['native_causal']:.1f} | {r['max_abs_diff']:.2e} |")


if __name__ == "__main__":
    main()
