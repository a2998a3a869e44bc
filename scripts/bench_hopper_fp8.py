"""Time the native Hopper FP8 forward (kernel alone: inputs already quantized, Vt already written) against our bf16
Hopper forward in the same run, at the FlashAttention-3 paper's shapes (batch * seqlen = 16384 tokens, nheads *
headdim = 2048). Also records the FP8 output's SQNR against the bf16 kernel's at every shape (a whole-shape sanity
check beyond the test sizes; ~25 dB is e4m3's level on N(0, 1) inputs). Writes JSON (--json), prints a markdown
table last.

Timing as scripts/bench_hopper.py: a CUDA sleep queues the launches, CUDA events around `--iters` back-to-back
calls, in `--reps` rounds of balanced order (bench_hopper.time_interleaved); medians and the median of the
per-round ratios.

    python scripts/bench_hopper_fp8.py --json out.json [--headdims 128 256] [--seqlens 2048 8192 16384]
        [--variants one_cta_per_tile] [--compare before=build/before/libfa3nn_hopper.so] [--block-k 384]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_hopper import TOKENS, WIDTH, compare_libraries, time_interleaved  # noqa: E402

from fa3nn.backends.hopper import launch  # noqa: E402
from fa3nn.backends.hopper_fp8 import fp8_forward  # noqa: E402
from fa3nn.fp8.operands import transpose_v  # noqa: E402
from fa3nn.fp8.quantize import quantize_qkv_tensors  # noqa: E402
from fa3nn.fp8.scaling import sqnr_db  # noqa: E402
from fa3nn.masks import Window  # noqa: E402
from fa3nn.metrics import attention_flops  # noqa: E402


def bench_shape(headdim: int, seqlen: int, causal: bool, args) -> dict:
    batch, nheads = TOKENS // seqlen, WIDTH // headdim
    q, k, v = (torch.randn(batch, seqlen, nheads, headdim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    quantized = quantize_qkv_tensors(q, k, v, 128, args.block_k)
    vt8 = transpose_v(quantized.v)
    scale = headdim**-0.5
    window = Window(-1, 0) if causal else Window()
    flops = attention_flops(batch, nheads, seqlen, seqlen, headdim, causal=causal)

    def fp8(variant="full", library=None):
        return lambda: fp8_forward(quantized.q, quantized.k, vt8, quantized.q_descale, quantized.k_descale,
                                   quantized.v_descale, quantized.block_q, quantized.block_k, scale, window,
                                   variant=variant, library=library)

    def bf16():
        return launch(q, k, v, scale, causal)

    reference = bf16()[0]
    fns = {"fp8": fp8(), **{f"fp8_{v}": fp8(v) for v in args.variants},
           **{f"fp8_{name}": fp8(library=lib) for name, lib in args.libraries.items()}, "bf16": bf16}
    sqnr = {}
    for name in [n for n in fns if n != "bf16"]:
        try:
            sqnr[name] = sqnr_db(fns[name]()[0], reference)
        except RuntimeError as exc:  # a benchmark variant that is not built for this head dim
            print(f"d{headdim}: {name} skipped ({exc})")
            del fns[name]
    samples = time_interleaved(fns, args.iters, args.reps)
    ms = {name: statistics.median(s) for name, s in samples.items()}
    speedup = statistics.median(b / f for f, b in zip(samples["fp8"], samples["bf16"]))
    return dict(headdim=headdim, seqlen=seqlen, causal=causal, batch=batch, nheads=nheads, ms=ms,
                tflops={name: flops / t / 1e9 for name, t in ms.items()}, fp8_over_bf16=speedup,
                sqnr_vs_bf16_db=sqnr, samples_ms=samples)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--headdims", type=int, nargs="+", default=[128, 256])
    parser.add_argument("--seqlens", type=int, nargs="+", default=[2048, 8192, 16384])
    parser.add_argument("--block-k", type=int, default=128,
                        help="K/V rows per descale (0: one per sequence); 384 serves the 128- and 192-key kernels")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--variants", nargs="*",
                        default=["no_pingpong", "other_stages", "poly_exp2", "one_cta_per_tile"],
                        help="FP8 benchmark variants timed beside the default (fa3nn.backends.hopper_fp8.VARIANTS)")
    parser.add_argument("--compare", nargs="*", default=[], metavar="NAME=PATH",
                        help="other builds of the library, their default kernel timed as fp8_NAME on the same inputs")
    args = parser.parse_args(argv)
    args.libraries = compare_libraries(parser, args.compare, args.variants)
    rows = []
    for headdim in args.headdims:
        for seqlen in args.seqlens:
            for causal in (False, True):
                rows.append(bench_shape(headdim, seqlen, causal, args))
                print(f"d{headdim} {seqlen} {'causal' if causal else 'full'}: {rows[-1]['tflops']}", flush=True)
                args.json.write_text(json.dumps(dict(device=torch.cuda.get_device_name(), rows=rows), indent=1))
    names = [f"fp8_{v}" for v in (*args.variants, *args.libraries)]
    print("| hdim | seqlen | causal | fp8 TFLOP/s | bf16 TFLOP/s | fp8 / bf16 | SQNR vs bf16 (dB) | "
          + " | ".join(f"{n} TFLOP/s" for n in names) + " |")
    print("|---" * (6 + len(names)) + "|---|")
    for r in rows:
        t = r["tflops"]
        print(f"| {r['headdim']} | {r['seqlen']} | {'yes' if r['causal'] else 'no'} | {t['fp8']:.1f} | "
              f"{t['bf16']:.1f} | {r['fp8_over_bf16']:.2f} | {r['sqnr_vs_bf16_db']['fp8']:.1f} | "
              + " | ".join(f"{t[n]:.1f}" if n in t else "-" for n in names) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
