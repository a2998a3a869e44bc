"""Benchmark the native Hopper forward against cuDNN SDPA in the same run, at the FlashAttention-3 paper's shapes
(batch * seqlen = 16384 tokens, nheads * headdim = 2048), plus the ablation rows (no pingpong, no intra-warpgroup
overlap) at head dim 128. Writes JSON (to --json) and prints a markdown table last.

Timing: a CUDA sleep kernel is queued first so that all timed launches are enqueued before the GPU reaches them;
CUDA events around `--iters` back-to-back calls then measure device time only (no host launch gaps). cuDNN and
every variant are timed round-robin, `--reps` times, so clock drift hits them alike; the table gives medians and
the median of the per-round ratios.

    python scripts/bench_hopper.py --json out.json [--headdims 64 128 256] [--seqlens 512 ... 16384]

To compare kernel versions in one run, build each (`python -m fa3nn.backends.hopper_build --out DIR/lib.so`) and
pass `--compare NAME=PATH ...`: every shape then also times the full variant of each of those libraries as row
variant NAME, next to this checkout's (or FA3NN_HOPPER_LIB's) library and cuDNN.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from fa3nn.backends.hopper import VARIANTS, launch
from fa3nn.metrics import attention_flops

TOKENS, WIDTH = 16384, 2048


def compare_libraries(parser: argparse.ArgumentParser, items: list[str], reserved=()) -> dict:
    """--compare NAME=PATH ... -> {NAME: the loaded library build}; NAME must not be one of `reserved` (the
    script's own variant names, which label rows the same way)."""
    from fa3nn.backends import hopper_build

    libraries = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or name in reserved:
            parser.error(f"--compare expects NAME=PATH with NAME not a kernel variant, got {item!r}")
        libraries[name] = hopper_build.load(Path(path))
    return libraries


def time_interleaved(fns: dict, iters: int, reps: int) -> dict[str, list[float]]:
    """ms per call for each fn, `reps` samples each, taken round-robin so clock drift hits every fn alike. Round r
    starts at the r-th fn: on 2026-12-01 the fn timed first in every round ran 10-15% slower than its own build
    timed later in the round at seqlen 16384 (FP8 d128 3.5-3.7 ms vs 3.1), not at 4096/8192; rotating the order
    spreads such a position effect over every fn instead of charging it to one."""
    for fn in fns.values():
        fn()
    torch.cuda.synchronize()
    samples = {name: [] for name in fns}
    order = list(fns.items())
    for rep in range(reps):
        for name, fn in order[rep % len(order):] + order[:rep % len(order)]:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(2_000_000)  # ~1 ms: the launches below queue up behind it
            start.record()
            for _ in range(iters):
                fn()
            end.record()
            torch.cuda.synchronize()
            samples[name].append(start.elapsed_time(end) / iters)
    return samples


def bench_shape(headdim: int, seqlen: int, causal: bool, args, variants=("full",), libraries=None) -> list[dict]:
    """One shape: cuDNN, this library's `variants`, and the full variant of each of `libraries` (name -> CDLL)."""
    libraries = libraries or {}
    batch, nheads = TOKENS // seqlen, WIDTH // headdim
    q, k, v = (torch.randn(batch, seqlen, nheads, headdim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    scale = headdim**-0.5
    flops = attention_flops(batch, nheads, seqlen, seqlen, headdim, causal=causal)

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                  is_causal=causal, scale=scale)

    def run(variant):
        if variant in libraries:
            return launch(q, k, v, scale, causal, library=libraries[variant])
        return launch(q, k, v, scale, causal, variant=variant)

    variants = (*variants, *libraries)
    fns = {"cudnn": cudnn}
    for variant in variants:
        fns[variant] = lambda variant=variant: run(variant)
    ref = cudnn().transpose(1, 2)
    diffs = {variant: (run(variant)[0].float() - ref.float()).abs().max().item() for variant in variants}
    samples = time_interleaved(fns, args.iters, args.reps)
    ms_cudnn = statistics.median(samples["cudnn"])
    rows = []
    for variant in variants:
        ms = statistics.median(samples[variant])
        ratio = statistics.median(c / h for c, h in zip(samples["cudnn"], samples[variant]))
        rows.append(dict(
            headdim=headdim, seqlen=seqlen, causal=causal, batch=batch, nheads=nheads, variant=variant,
            ms=ms, tflops=flops / ms / 1e9, cudnn_ms=ms_cudnn, cudnn_tflops=flops / ms_cudnn / 1e9,
            ratio=ratio, max_abs_diff_vs_cudnn=diffs[variant], samples_ms=samples[variant],
            cudnn_samples_ms=samples["cudnn"],
        ))
    return rows


# Alternative tile shapes compiled next to the default (kernels/hopper/flash_fwd_api.cu, `Tiles`).
EXPERIMENTS = {64: ("tiles_a", "tiles_b"), 128: ("tiles_a", "tiles_b"), 256: ("tiles_a",)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", default=None)
    parser.add_argument("--headdims", type=int, nargs="+", default=[64, 128, 256])
    parser.add_argument("--seqlens", type=int, nargs="+", default=[512, 1024, 2048, 4096, 8192, 16384])
    parser.add_argument("--ablation-seqlens", type=int, nargs="*", default=[2048, 8192, 16384])
    parser.add_argument("--experiment-seqlens", type=int, nargs="*", default=[])
    parser.add_argument("--experiment-headdims", type=int, nargs="*", default=[64, 128, 256])
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--compare", nargs="*", default=[], metavar="NAME=PATH",
                        help="other builds of the library, timed as variant NAME next to every full-variant row")
    parser.add_argument("--variants", nargs="*", default=["full"], help="variants of this library per shape")
    args = parser.parse_args()
    libraries = compare_libraries(parser, args.compare, VARIANTS)
    torch.backends.cuda.matmul.allow_tf32 = False
    rows = []
    for headdim in args.headdims:
        for seqlen in args.seqlens:
            for causal in (False, True):
                rows += bench_shape(headdim, seqlen, causal, args, tuple(args.variants), libraries)
    ablations = ("full", "no_pingpong", "no_overlap", "no_pingpong_no_overlap", "no_cross_tile")
    for headdim in args.headdims:
        for seqlen in args.ablation_seqlens:
            extra = ("skip_kv_loads",) if headdim == 128 else ()
            rows += bench_shape(headdim, seqlen, False, args, variants=ablations + extra)
    for headdim in args.experiment_headdims:
        for seqlen in args.experiment_seqlens:
            for causal in (False, True):
                rows += bench_shape(headdim, seqlen, causal, args, variants=("full", *EXPERIMENTS[headdim]))
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
