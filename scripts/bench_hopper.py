"""Benchmark the native Hopper forward against cuDNN SDPA in the same run, at the FlashAttention-3 paper's shapes
(batch * seqlen = 16384 tokens, nheads * headdim = 2048), plus the ablation rows (no pingpong, no intra-warpgroup
overlap) at head dim 128. Writes JSON (to --json) and prints a markdown table last.

Timing: a CUDA sleep kernel is queued first so that all timed launches are enqueued before the GPU reaches them;
CUDA events around `--iters` back-to-back calls then measure device time only (no host launch gaps). cuDNN and
every variant are timed in `--reps` rounds whose orders balance which call follows which (time_interleaved), so
clock drift and carry-over hit them alike; the table gives medians and the median of the per-round ratios.

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


def balanced_orders(n: int) -> list[list[int]]:
    """A Williams design: n orders of range(n) (2n when n is odd) in which each index directly follows each other
    index equally often, so whatever one call leaves behind for the next (clocks, power, L2) is spread over every
    call alike; exactly so when the rounds timed are a multiple of the orders' count."""
    first, low, high = [0], 1, n - 1
    while len(first) < n:
        first.append(low if len(first) % 2 else high)
        low, high = (low + 1, high) if len(first) % 2 == 0 else (low, high - 1)
    orders = [[(i + shift) % n for i in first] for shift in range(n)]
    return orders + [order[::-1] for order in orders] if n % 2 and n > 1 else orders


def time_interleaved(fns: dict, iters: int, reps: int) -> dict[str, list[float]]:
    """ms per call for each fn, `reps` samples each, taken in rounds so clock drift hits every fn alike. The order
    of round r is balanced_orders(len(fns))[r % its length]: each fn directly follows each other fn equally often.
    Before 2026-12-02 round r was the fixed order rotated by r, so the first fn always followed the last (bf16 in
    the FP8 scripts) in all rounds but one, and at seqlen 16384 read 5-8% slower than the same kernel timed as a
    later entry (d256: 862 against 933 TFLOP/s non-causal; its per-round samples 2.22-2.27 ms when first in the
    round, 2.47-2.71 ms right after the bf16 forward; results/fp8ab-h200-20261202-0544/)."""
    for fn in fns.values():
        fn()
    torch.cuda.synchronize()
    samples = {name: [] for name in fns}
    items = list(fns.items())
    orders = balanced_orders(len(items))
    for rep in range(reps):
        for index in orders[rep % len(orders)]:
            name, fn = items[index]
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
    headdim_v = args.headdim_v or headdim
    q, k, v = (torch.randn(batch, seqlen, nheads, d, device="cuda", dtype=torch.bfloat16)
               for d in (headdim, headdim, headdim_v))
    scale = headdim**-0.5
    flops = attention_flops(batch, nheads, seqlen, seqlen, headdim, headdim_v, causal=causal)

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
            headdim=headdim if headdim_v == headdim else f"{headdim}/{headdim_v}", seqlen=seqlen, causal=causal,
            batch=batch, nheads=nheads, variant=variant,
            ms=ms, tflops=flops / ms / 1e9, cudnn_ms=ms_cudnn, cudnn_tflops=flops / ms_cudnn / 1e9,
            ratio=ratio, max_abs_diff_vs_cudnn=diffs[variant], samples_ms=samples[variant],
            cudnn_samples_ms=samples["cudnn"],
        ))
    return rows


# Alternative tile shapes compiled next to the default (kernels/hopper/flash_fwd_api.cu, `Tiles`).
EXPERIMENTS = {64: ("tiles_a", "tiles_b"), 128: ("tiles_a", "tiles_b"), 256: ("tiles_a",), 192: ("tiles_a", "tiles_b")}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", default=None)
    parser.add_argument("--headdims", type=int, nargs="+", default=[64, 128, 256])
    parser.add_argument("--headdim-v", type=int, default=None,
                        help="V's head dim when it differs from q / k's (MLA: --headdims 192 --headdim-v 128)")
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
    if args.headdim_v is not None and (len(args.headdims) != 1 or args.experiment_headdims not in ([], args.headdims)):
        parser.error("--headdim-v applies to one --headdims value (and --experiment-headdims that one or none)")
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
