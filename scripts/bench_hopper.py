"""Benchmark the native Hopper forward against cuDNN SDPA in the same run, at the FlashAttention-3 paper's shapes
(batch * seqlen = 16384 tokens, nheads * headdim = 2048), plus the ablation rows (no pingpong, no intra-warpgroup
overlap) at head dim 128. Writes JSON (to --json) and prints a markdown table last.

Timing: a CUDA sleep kernel is queued first so that all timed launches are enqueued before the GPU reaches them;
CUDA events around `--iters` back-to-back calls then measure device time only (no host launch gaps), and the
median over `--reps` such batches is reported.

    python scripts/bench_hopper.py --json out.json [--headdims 64 128 256] [--seqlens 512 ... 16384]
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from fa3nn.backends.hopper import launch
from fa3nn.metrics import attention_flops

TOKENS, WIDTH = 16384, 2048


def device_time_ms(fn, iters: int, reps: int) -> float:
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(2_000_000)  # ~1 ms: the launches below queue up behind it
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / iters)
    return statistics.median(times)


def bench_shape(headdim: int, seqlen: int, causal: bool, args, variants=("full",)) -> list[dict]:
    batch, nheads = TOKENS // seqlen, WIDTH // headdim
    q, k, v = (torch.randn(batch, seqlen, nheads, headdim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    scale = headdim**-0.5
    flops = attention_flops(batch, nheads, seqlen, seqlen, headdim, causal=causal)
    rows = []

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                  is_causal=causal, scale=scale)

    ms_cudnn = device_time_ms(cudnn, args.iters, args.reps)
    ref = cudnn().transpose(1, 2)
    for variant in variants:
        out, _ = launch(q, k, v, scale, causal, variant=variant)
        max_diff = (out.float() - ref.float()).abs().max().item()
        ms = device_time_ms(lambda variant=variant: launch(q, k, v, scale, causal, variant=variant), args.iters,
                            args.reps)
        rows.append(dict(
            headdim=headdim, seqlen=seqlen, causal=causal, batch=batch, nheads=nheads, variant=variant,
            ms=ms, tflops=flops / ms / 1e9, cudnn_ms=ms_cudnn, cudnn_tflops=flops / ms_cudnn / 1e9,
            ratio=ms_cudnn / ms, max_abs_diff_vs_cudnn=max_diff,
        ))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", default=None)
    parser.add_argument("--headdims", type=int, nargs="+", default=[64, 128, 256])
    parser.add_argument("--seqlens", type=int, nargs="+", default=[512, 1024, 2048, 4096, 8192, 16384])
    parser.add_argument("--ablation-seqlens", type=int, nargs="*", default=[2048, 8192, 16384])
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    rows = []
    for headdim in args.headdims:
        for seqlen in args.seqlens:
            for causal in (False, True):
                rows += bench_shape(headdim, seqlen, causal, args)
    for seqlen in args.ablation_seqlens:
        rows += bench_shape(128, seqlen, False, args,
                            variants=("full", "no_pingpong", "no_overlap", "no_pingpong_no_overlap"))
    meta = dict(device=torch.cuda.get_device_name(), torch=torch.__version__,
                cudnn=torch.backends.cudnn.version(), dtype="bfloat16")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(meta=meta, rows=rows), f, indent=1)
    print(f"\n{meta}")
    print("| hdim | seqlen | causal | variant | hopper TFLOP/s | cuDNN TFLOP/s | ratio | max diff |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['headdim']} | {r['seqlen']} | {'yes' if r['causal'] else 'no'} | {r['variant']} | "
              f"{r['tflops']:.1f} | {r['cudnn_tflops']:.1f} | {r['ratio']:.2f} | {r['max_abs_diff_vs_cudnn']:.3g} |")


if __name__ == "__main__":
    main()
