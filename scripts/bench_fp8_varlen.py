"""Time the native Hopper FP8 forward on packed (varlen) batches, which the 16-aligned vt8 layout makes possible,
against the paths that serve such calls today, in the same run: the Triton FP8 forward (where dispatch sends FP8
varlen now), our bf16 Hopper forward, and the native FP8 forward on a dense batch of the same token count. Also
times the fused quantization pass on the packed batch (it now zero-fills vt8 and computes vt_starts) against the
same pass on the dense batch. Writes JSON (--json) and prints a markdown table last.

Shapes: 16384 tokens, nheads * headdim = 2048 (the FlashAttention-3 paper's), sequence lengths drawn around
--mean-seqlen and forced odd, so every sequence after the first starts off the 16-key grid in k8 (the case that
faulted before). Before timing, the native output is compared with the Triton FP8 one on the same operands and with
the bf16 forward (SQNR in dB; the GPU tests hold the correctness bar, this only catches a broken shape).

Timing as scripts/bench_hopper.py (time_interleaved: CUDA events around --iters calls, --reps rounds of balanced order).

    python scripts/bench_fp8_varlen.py --json out.json [--headdims 128 256] [--mean-seqlen 2048]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_hopper import TOKENS, WIDTH, time_interleaved  # noqa: E402

from fa3nn.backends.base import Varlen  # noqa: E402
from fa3nn.backends.hopper import launch  # noqa: E402
from fa3nn.backends.hopper_fp8 import fp8_forward  # noqa: E402
from fa3nn.backends.triton.fp8_launch import forward_fp8 as triton_fp8_forward  # noqa: E402
from fa3nn.backends.triton.quantize import quantize_fused  # noqa: E402
from fa3nn.fp8.scaling import sqnr_db  # noqa: E402
from fa3nn.masks import Window  # noqa: E402
from fa3nn.metrics import attention_flops  # noqa: E402


def draw_lengths(mean: int, tokens: int, seed: int) -> list[int]:
    """Odd lengths in [mean / 2, 3 mean / 2) until `tokens` is used up (the last one takes the rest, made odd)."""
    generator = torch.Generator().manual_seed(seed)
    lengths: list[int] = []
    while tokens - sum(lengths) > 3 * mean // 2:
        lengths.append(int(torch.randint(mean // 2, 3 * mean // 2, (1,), generator=generator)) | 1)
    rest = tokens - sum(lengths)
    return lengths + [rest - 1 + rest % 2]


def bench_shape(headdim: int, causal: bool, lengths: list[int], args) -> dict:
    nheads = WIDTH // headdim
    total = sum(lengths)
    q, k, v = (torch.randn(total, nheads, headdim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32, device="cuda")
    longest = max(lengths)
    scale = headdim**-0.5
    window = Window(-1, 0) if causal else Window()
    ops = quantize_fused(q, k, v, 128, 128, None, None, cu, cu, longest, longest)
    dense_batch = TOKENS // args.mean_seqlen
    qd, kd, vd = (torch.randn(dense_batch, args.mean_seqlen, nheads, headdim, device="cuda", dtype=torch.bfloat16)
                  for _ in range(3))
    dense_ops = quantize_fused(qd, kd, vd, 128, 128)
    varlen = Varlen(cu, cu, longest, longest, tuple(cu.tolist()), tuple(cu.tolist()))

    def operands(o, cu_=None, max_=None):
        return (o.q, o.k, o.vt, o.q_descale, o.k_descale, o.v_descale, 128, 128, scale, window, cu_, cu_, max_, max_,
                torch.bfloat16)

    fns = {
        "fp8_native": lambda: fp8_forward(*operands(ops, cu, longest), vt_starts=ops.vt_starts),
        "fp8_triton": lambda: triton_fp8_forward(*operands(ops, cu, longest), vt_starts=ops.vt_starts),
        "bf16_native": lambda: launch(q, k, v, scale, causal, varlen),
        "fp8_native_dense": lambda: fp8_forward(*operands(dense_ops)),
        "quant_varlen": lambda: quantize_fused(q, k, v, 128, 128, None, None, cu, cu, longest, longest),
        "quant_dense": lambda: quantize_fused(qd, kd, vd, 128, 128),
    }
    native, triton_out, bf16 = fns["fp8_native"]()[0], fns["fp8_triton"]()[0], fns["bf16_native"]()[0]
    torch.cuda.synchronize()
    samples = time_interleaved(fns, args.iters, args.reps)
    ms = {name: statistics.median(s) for name, s in samples.items()}
    flops_varlen = sum(attention_flops(1, nheads, n, n, headdim, causal=causal) for n in lengths)
    flops_dense = attention_flops(dense_batch, nheads, args.mean_seqlen, args.mean_seqlen, headdim, causal=causal)
    tflops = {name: (flops_dense if name.endswith("dense") else flops_varlen) / ms[name] / 1e9
              for name in ("fp8_native", "fp8_triton", "bf16_native", "fp8_native_dense")}
    ratio = {f"fp8_native_over_{peer}": statistics.median(p / n for n, p in zip(samples["fp8_native"], samples[peer]))
             for peer in ("fp8_triton", "bf16_native")}
    return dict(headdim=headdim, causal=causal, lengths=lengths, nheads=nheads, ms=ms, tflops=tflops, **ratio,
                finite=bool(torch.isfinite(native).all()),
                sqnr_native_vs_triton_db=sqnr_db(native, triton_out), sqnr_native_vs_bf16_db=sqnr_db(native, bf16))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--headdims", type=int, nargs="+", default=[128, 256])
    parser.add_argument("--mean-seqlen", type=int, default=2048)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args(argv)
    lengths = draw_lengths(args.mean_seqlen, TOKENS, args.seed)
    print(f"lengths {lengths}", flush=True)
    rows = []
    for headdim in args.headdims:
        for causal in (False, True):
            rows.append(bench_shape(headdim, causal, lengths, args))
            print(f"d{headdim} {'causal' if causal else 'full'}: {rows[-1]['tflops']}", flush=True)
            args.json.write_text(json.dumps(dict(device=torch.cuda.get_device_name(), rows=rows), indent=1))
    print("| hdim | causal | fp8 native varlen | fp8 triton varlen | bf16 native varlen | fp8 native dense | "
          "speedup vs triton | speedup vs bf16 | quant varlen / dense (ms) | SQNR vs triton / bf16 (dB) |")
    print("|---" * 10 + "|")
    for r in rows:
        t, ms = r["tflops"], r["ms"]
        print(f"| {r['headdim']} | {'yes' if r['causal'] else 'no'} | {t['fp8_native']:.1f} | {t['fp8_triton']:.1f} | "
              f"{t['bf16_native']:.1f} | {t['fp8_native_dense']:.1f} | {r['fp8_native_over_fp8_triton']:.2f} | "
              f"{r['fp8_native_over_bf16_native']:.2f} | {ms['quant_varlen']:.3f} / {ms['quant_dense']:.3f} | "
              f"{r['sqnr_native_vs_triton_db']:.1f} / {r['sqnr_native_vs_bf16_db']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
