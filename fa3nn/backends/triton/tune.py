"""Sweep tile shapes for the Triton kernels on the current GPU, one kernel at a time, to fill configs.PINNED.

    python -m fa3nn.backends.triton.tune --headdim 128 --seqlen 4096 --json tune.json

Each variant pins one kernel's tile (configs.OVERRIDES; the others keep their pinned tiles) and is timed with CUDA
events over back-to-back calls (median of several batches). All variants are compiled first in parallel worker
processes (Triton's on-disk cache then serves the timing process), since compiling dominates a sweep's wall time.
Shapes follow the benchmark: batch * seqlen = 16384 tokens, nheads * headdim = 2048, bf16.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import os
import statistics

import torch

from fa3nn.backends.base import AttnParams
from fa3nn.backends.triton import configs
from fa3nn.backends.triton.configs import Tile
from fa3nn.masks import Window
from fa3nn.metrics import attention_flops

CANDIDATES = {
    "fwd": [Tile(128, 64, 8, 3), Tile(128, 128, 8, 3), Tile(128, 128, 8, 2), Tile(128, 64, 8, 2), Tile(64, 64, 4, 3),
            Tile(128, 64, 4, 3), Tile(64, 128, 4, 3), Tile(64, 64, 8, 2), Tile(128, 32, 8, 2), Tile(64, 128, 8, 2)],
    "dkdv": [Tile(32, 128, 8, 2), Tile(64, 128, 8, 2), Tile(32, 128, 8, 3), Tile(64, 128, 8, 3), Tile(64, 64, 8, 2),
             Tile(64, 128, 8, 1), Tile(32, 64, 4, 3), Tile(32, 64, 4, 4), Tile(64, 64, 4, 3), Tile(64, 64, 4, 2),
             Tile(64, 64, 4, 4), Tile(128, 64, 8, 2), Tile(128, 64, 8, 3), Tile(128, 64, 4, 2)],
    "dkdv_split": [Tile(32, 128, 8, 2), Tile(64, 128, 8, 1), Tile(32, 128, 8, 1), Tile(16, 128, 8, 2),
                   Tile(16, 128, 8, 3), Tile(32, 64, 8, 2), Tile(64, 64, 8, 2), Tile(32, 64, 4, 2), Tile(16, 64, 4, 3)],
    # the output split's kernels (launch.key_block_kinds): one accumulator each, so more stages fit
    "dv": [Tile(64, 128, 8, 2), Tile(64, 128, 8, 3), Tile(64, 128, 8, 1), Tile(128, 128, 8, 2), Tile(64, 64, 4, 2),
           Tile(64, 64, 4, 3), Tile(32, 64, 4, 3), Tile(128, 64, 8, 2), Tile(32, 128, 8, 2), Tile(64, 64, 8, 2)],
    "dk": [Tile(64, 128, 8, 2), Tile(64, 128, 8, 3), Tile(64, 128, 8, 1), Tile(128, 128, 8, 2), Tile(64, 64, 4, 2),
           Tile(64, 64, 4, 3), Tile(32, 64, 4, 3), Tile(128, 64, 8, 2), Tile(32, 128, 8, 2), Tile(64, 64, 8, 2)],
    "fused": [Tile(64, 128, 8, 2), Tile(32, 128, 8, 2), Tile(64, 128, 8, 3), Tile(32, 128, 8, 3), Tile(64, 64, 8, 2)],
    "dq": [Tile(128, 64, 8, 2), Tile(128, 64, 8, 3), Tile(128, 128, 8, 2), Tile(64, 64, 4, 3), Tile(64, 128, 8, 2),
           Tile(64, 32, 4, 2), Tile(128, 32, 8, 2), Tile(64, 64, 8, 2), Tile(128, 64, 8, 4), Tile(128, 64, 4, 3),
           Tile(64, 64, 4, 4)],
}


def _variants(headdim: int, causals, tma_options, kinds=tuple(CANDIDATES)):
    for causal in causals:
        for kind in kinds:
            tiles = CANDIDATES[kind]
            for tile in tiles:
                for tma in tma_options if kind == "fwd" else ("0",):
                    yield {"kind": kind, "tile": tile, "causal": causal, "tma": tma, "headdim": headdim}


def _pin(variant) -> None:
    """Run this variant's kernel with its tile (configs.OVERRIDES), the other kernels with their pinned tiles."""
    os.environ["FA3NN_TRITON_AUTOTUNE"] = "0"
    os.environ["FA3NN_TRITON_TMA"] = variant["tma"]
    configs.OVERRIDES.clear()
    configs.OVERRIDES[variant["kind"]] = variant["tile"]


def benchmark_inputs(headdim: int, seqlen: int, tokens: int = 16384, width: int = 2048):
    """q, k, v, dout at the benchmark's shapes (batch * seqlen = tokens, nheads * headdim = width; bf16, CUDA, N(0, 1)):
    what the sweeps here and scripts/triton_tile_ab.py / bwd_breakdown.py time."""
    batch, nheads = max(1, tokens // seqlen), max(1, width // headdim)
    return [torch.randn(batch, seqlen, nheads, headdim, device="cuda", dtype=torch.bfloat16) for _ in range(4)]


def _run(variant, q, k, v, dout):
    from fa3nn.backends.triton import launch

    launch.ATOMIC_DQ = variant["kind"] in configs.ATOMIC_DQ_KINDS
    # the kernel whose tile is pinned must be the one that runs: "dkdv" and "fused" are the unsplit kernels
    unsplit = variant["kind"] in configs.KEY_BLOCK_KINDS and variant["kind"] not in configs.SPLIT_KINDS
    launch.DKDV_SPLIT_D = "1" if unsplit else str(configs.DKDV_SPLIT_PARTS)
    # the output split runs for its own kinds, never for the one-kernel ones; the forward and dQ sweeps keep the
    # library's choice
    if variant["kind"] in configs.KEY_BLOCK_KINDS:
        launch.DKDV_OUTPUTS = "split" if variant["kind"] in configs.OUTPUT_SPLIT_KINDS else "joint"
    # "dkdv", "dkdv_split", "dv", "dk" and "dq" are the deterministic backward's kernels, "fused"/"fused_split" the
    # atomic ones
    deterministic = variant["kind"] not in configs.ATOMIC_DQ_KINDS
    params = AttnParams(q.shape[-1] ** -0.5, Window.from_args(variant["causal"], (-1, -1)), 0.0, deterministic)
    if variant["kind"] == "fwd":
        return lambda: launch.forward(q, k, v, params, None)
    out, lse = launch.forward(q, k, v, params, None)
    return lambda: launch.backward(dout, q, k, v, out, lse, None, params, None)


def _warm(variant) -> str:
    """Worker: compile one variant by running it once on a small shape."""
    _pin(variant)
    # 4096 tokens: enough programs that configs.fill_sms leaves the other kernels' tiles as the benchmark runs them
    _run(variant, *benchmark_inputs(variant["headdim"], 256, tokens=4096))()
    torch.cuda.synchronize()
    return "ok"


def precompile(headdims, causals, kinds=("fwd", "dkdv", "dq"), workers: int = 8) -> None:
    """Compile, in parallel processes (into Triton's on-disk cache), every tile configs.py pins for these head dims
    over all sequence buckets, plus the autotune candidates when FA3NN_TRITON_AUTOTUNE=1, so that the calling
    process only loads (or times) them. Used by scripts/bench.py --precompile."""
    from fa3nn.backends.triton import launch

    variants, seen = [], set()
    for headdim in headdims:
        block_d = max(32, triton_block(headdim))
        for causal in causals:
            for kind_asked in kinds:
                # "dkdv": the key-block kernels the default backward runs at this head dim, in each sequence bucket
                expanded = {kind for seqlen in configs.BUCKET_SEQLENS
                            for kind in launch.key_block_kinds(block_d, block_d, False, causal, seqlen)} \
                    if kind_asked == "dkdv" else {kind_asked}
                for kind in sorted(expanded):
                    tiles = list(configs.tile_table(kind)[(block_d, causal)])
                    if configs.autotune_enabled():
                        tiles += configs.ALTERNATIVES[kind][block_d]
                    for tile in tiles:
                        if (headdim, causal, kind, tile) not in seen:
                            seen.add((headdim, causal, kind, tile))
                            variants.append({"kind": kind, "tile": tile, "causal": causal, "tma": "auto",
                                             "headdim": headdim})
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(min(workers, len(variants)), mp_context=ctx) as pool:
        concurrent.futures.wait([pool.submit(_warm, v) for v in variants])


def triton_block(headdim: int) -> int:
    return max(16, configs.next_power_of_2(headdim))


def _time_ms(fn, iters: int = 10, reps: int = 5) -> float:
    fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(2_000_000)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end) / iters)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--headdim", type=int, default=128)
    parser.add_argument("--seqlen", type=int, default=4096)
    parser.add_argument("--causal", choices=["both", "yes", "no"], default="both")
    parser.add_argument("--tma", nargs="+", default=["0", "1"], help="forward variants: 0 pointers, 1 descriptors")
    parser.add_argument("--kinds", nargs="+", choices=list(CANDIDATES), default=list(CANDIDATES))
    parser.add_argument("--workers", type=int, default=min(14, os.cpu_count() or 1))
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    causals = {"both": [False, True], "yes": [True], "no": [False]}[args.causal]
    variants = list(_variants(args.headdim, causals, args.tma, args.kinds))
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(args.workers, mp_context=ctx) as pool:
        futures = [pool.submit(_warm, v) for v in variants]
        concurrent.futures.wait(futures)  # failures resurface (and are recorded) when timed below
    q, k, v, dout = benchmark_inputs(args.headdim, args.seqlen)
    results = []
    for variant in variants:
        row = {**variant, "tile": variant["tile"].__dict__}
        _pin(variant)
        try:
            ms = _time_ms(_run(variant, q, k, v, dout))
        except Exception as exc:  # e.g. a tile over the shared-memory limit
            row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
        else:
            direction = "fwd" if variant["kind"] == "fwd" else "bwd"
            flops = attention_flops(q.shape[0], q.shape[2], args.seqlen, args.seqlen, args.headdim,
                                    causal=variant["causal"], direction=direction)
            row["ms"], row["tflops"] = ms, flops / ms / 1e9
        results.append(row)
        t = variant["tile"]
        print(f"{variant['kind']:5} causal={int(variant['causal'])} tma={variant['tma']} "
              f"({t.block_m},{t.block_n},w{t.num_warps},s{t.num_stages}): "
              + (f"{row['tflops']:.1f} TFLOP/s" if "tflops" in row else row["error"]), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"headdim": args.headdim, "seqlen": args.seqlen, "gpu": torch.cuda.get_device_name(),
                       "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
