"""Time the Triton backward (or, with --direction fwd, the forward) with each variant side by side on one GPU,
after checking each variant's gradients (outputs).

A variant is a tile table (`pinned` = configs.PINNED, or a name from configs.CANDIDATE_TABLES), optionally with
`+row-stats` (launch.UNMASKED_ROW_STATS: the dK/dV kernel's unmasked run without the row checks that cannot fire),
`+split-d` (launch.DKDV_SPLIT_D = 2, the library's default: two dK/dV programs per key block at head dims >= 256,
half the columns each, tiles configs.PINNED["dkdv_split"]; without it the one-program kernel)
`+atomic` or `+atomic-MxNxWxS` (launch.ATOMIC_DQ: dQ added by the dK/dV kernel, 5 matmuls, TMA reduce-adds on
sm_90; the fused kernel's pinned tile or the one named), `+dkdv-tma` (launch.DKDV_TMA_LOADS: the dK/dV kernel's Q
and dO through tensor descriptors, forced; without it the library's choice; `+dv-tma` / `+dk-tma` the same for one
of the output split's kernels, through configs.TMA_LOADS), `+tma3d` / `+tma2d`
(launch.TMA_BATCHED forced on / off: every descriptor over (batch, seqlen, heads * dim) views, dense calls),
`+dq-tma` / `+dq-ptr` (launch.DQ_TMA_LOADS forced on / off: the dQ kernel's K and V through descriptors; without
these four the library's choices, configs.TMA_BATCHED / TMA_LOADS, since the fifteenth session: off before),
`+query-major` / `+key-major` (launch.DKDV_QUERY_MAJOR forced; without either, the
library's choice), `+output-split` / `+joint` (launch.DKDV_OUTPUTS forced: the "dv" and "dk" kernels instead of
the one dK/dV kernel, or not), with `+dkdv-MxNxWxS` naming the one dK/dV kernel's tile, `+dv-MxNxWxS` /
`+dk-MxNxWxS` / `+dk_dq-MxNxWxS` the split kernels' (the last: the dK kernel with +atomic),
`+dq-MxNxWxS` the dQ kernel's and `+fwd-MxNxWxS` the forward's, and `+streams` / `+one-stream`
(launch.BWD_STREAMS forced on / off: the dQ kernel on a second stream, concurrent with the key-block kernels;
without either, the library's default, on since 2026-12-02; the thirteenth session's results before that default
ran one stream unless +streams). (`+delta-beside-dv`, the seventeenth session's s16e A/B, ran a since-removed
launcher option: no gain.)
The first variant is the baseline of the ratios.
For every (head dim, seqlen, causal) at the benchmark's shapes (bf16, batch * seqlen = 16384 tokens, nheads * head
dim = 2048) and every variant named in --variants:
  1. check: fa3nn's reference on batch 0, heads 0-1 (scripts/bench.py's check), and the full-shape gradients (the
     forward's output and lse) against the first variant's (max |difference| / max |first| each): a candidate tile
     only changes the summation order, so anything above 2e-2 is a bug, not rounding (and +row-stats on the pinned
     tiles must give 0);
  2. time launch.backward alone (delta + dK/dV + dQ kernels; launch.forward with --direction fwd) with bench.py's
     event timing, the variants one after the other on the same inputs. A variant that runs the same kernels as an
     earlier one at a shape is skipped.
Writes $OUT/triton_tile_ab.json (or --json) and prints a table last: TFLOP/s and the ratio to the first variant.

    python scripts/triton_tile_ab.py                     # pinned vs every table, with and without +row-stats
    python scripts/triton_tile_ab.py --variants pinned pinned+row-stats --headdims 128 --seqlens 2048 8192
    python scripts/triton_tile_ab.py --variants pinned+row-stats pinned+row-stats+atomic-64x128x8x1
    python scripts/triton_tile_ab.py --direction fwd --variants pinned pinned+tma3d pinned+tma2d
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bench  # noqa: E402  (scripts/bench.py: check and time_ms)
import torch  # noqa: E402

from fa3nn import flash_attn_func  # noqa: E402
from fa3nn.backends.base import AttnParams  # noqa: E402
from fa3nn.backends.triton import configs, launch  # noqa: E402
from fa3nn.backends.triton.tune import benchmark_inputs  # noqa: E402
from fa3nn.masks import Window  # noqa: E402
from fa3nn.metrics import attention_flops  # noqa: E402

MAX_DIFF_TO_PINNED = 2e-2  # another tile: another summation order; the same tiles (+row-stats) must match exactly
VARIANTS = ["pinned", "pinned+row-stats"] + [f"{name}{option}" for name in configs.CANDIDATE_TABLES
                                             for option in ("", "+row-stats")]


FLAGS = ("row-stats", "split-d", "dkdv-tma", "dv-tma", "dk-tma", "tma3d", "tma2d", "dq-tma", "dq-ptr", "query-major",
         "key-major", "output-split", "joint", "streams", "one-stream")
LIBRARY_TMA_LOADS = {kind: dict(table) for kind, table in configs.TMA_LOADS.items()}  # restored by every select()
LIBRARY_STREAMS = launch.BWD_STREAMS  # the library's default (FA3NN_TRITON_BWD_STREAMS), kept unless a flag says
# +<kind>-MxNxWxS pins that kernel's tile (+atomic alone: the pinned one)
TILE_OPTIONS = ("atomic", "dkdv", "dv", "dk", "dk_dq", "dq", "fwd")


def launch_flags() -> tuple:
    """The launcher switches select() sets besides the tiles: part of what makes two variants' kernels differ."""
    return (launch.UNMASKED_ROW_STATS, launch.DKDV_SPLIT_D, launch.DKDV_TMA_LOADS, launch.TMA_BATCHED,
            launch.DQ_TMA_LOADS, launch.DKDV_QUERY_MAJOR, launch.DKDV_OUTPUTS, launch.BWD_STREAMS,
            tuple(sorted((kind, tuple(sorted(table.items()))) for kind, table in configs.TMA_LOADS.items())))


def select(variant: str) -> None:
    """Make `variant` ("<table>[+row-stats][+atomic[-MxNxWxS]]") the one launch.backward runs."""
    table, *options = variant.split("+")
    tiles = {}  # kernel name -> its option ("atomic" alone, or "<name>-MxNxWxS")
    for option in options:
        name = option.split("-")[0]
        is_tile = option == "atomic" or (name in TILE_OPTIONS and re.fullmatch(r"[a-z_]+-\d+x\d+x\d+x\d+", option))
        if (is_tile and name in tiles) or (not is_tile and option not in FLAGS):
            raise ValueError(f"variant {variant!r}: the options are +{', +'.join(FLAGS)}, +atomic[-MxNxWxS], "
                             "+<dkdv|dv|dk|dk_dq|dq|fwd>-MxNxWxS, each once")
        if is_tile:
            tiles[name] = option
    atomic = [tiles["atomic"]] if "atomic" in tiles else []
    configs.TILE_TABLE = table
    configs.tile_table("dkdv")  # refuses an unknown table name
    launch.UNMASKED_ROW_STATS = "row-stats" in options
    launch.DKDV_SPLIT_D = 2 if "split-d" in options else 1
    launch.ATOMIC_DQ = bool(atomic)
    launch.DKDV_TMA_LOADS = "1" if "dkdv-tma" in options else "auto"  # else the library's choice
    launch.TMA_BATCHED = "1" if "tma3d" in options else "0" if "tma2d" in options else "auto"
    launch.DQ_TMA_LOADS = "1" if "dq-tma" in options else "0" if "dq-ptr" in options else "auto"
    configs.TMA_LOADS.clear()
    configs.TMA_LOADS.update({kind: dict(table) for kind, table in LIBRARY_TMA_LOADS.items()})
    for kind in ("dv", "dk"):  # one output-split kernel's Q / dO through descriptors (the table's entry for it)
        if f"{kind}-tma" in options:
            configs.TMA_LOADS[kind] = {key: (True,) * 3 for key in configs.PINNED[kind]}
    launch.DKDV_QUERY_MAJOR = "1" if "query-major" in options else "0" if "key-major" in options else "auto"
    launch.DKDV_OUTPUTS = "split" if "output-split" in options else "joint" if "joint" in options else "auto"
    launch.BWD_STREAMS = "streams" in options or ("one-stream" not in options and LIBRARY_STREAMS)
    for kind in ("fused", "fused_split", "dkdv", "dv", "dk", "dk_dq", "dq", "fwd"):
        configs.OVERRIDES.pop(kind, None)
    if atomic and atomic[0] != "atomic":  # the atomic kernel's tile, split over the head dim (+split-d) or not
        configs.OVERRIDES["fused"] = configs.OVERRIDES["fused_split"] = _tile(atomic[0])
    for kind in ("dkdv", "dv", "dk", "dk_dq", "dq", "fwd"):
        if kind in tiles:
            configs.OVERRIDES[kind] = _tile(tiles[kind])


def _tile(option: str) -> configs.Tile:
    """The tile of an option "<name>-MxNxWxS"."""
    return configs.Tile(*(int(x) for x in option.split("-", 1)[1].split("x")))


def kinds(headdim: int, causal: bool, seqlen: int, direction: str = "bwd") -> tuple[str, ...]:
    """The tiled kernels of `direction` ("fwd": the forward's; "bwd": the backward's) under the selected variant."""
    if direction == "fwd":
        return ("fwd",)
    key_block = launch.key_block_kinds(headdim, headdim, launch.ATOMIC_DQ, causal, seqlen)
    return key_block if launch.ATOMIC_DQ else (*key_block, "dq")


def tile_of(kind: str, headdim: int, causal: bool, seqlen: int) -> configs.Tile:
    return configs.OVERRIDES.get(kind) or configs.pinned(kind, headdim, causal, seqlen)


def _warm(job: tuple) -> str:
    """Worker: compile one variant's backward kernels for one shape into Triton's disk cache, on a small input
    (configs.OVERRIDES pins the tiles the full shape would use, past fill_sms and the sequence bucket)."""
    variant, headdim, seqlen, causal, direction = job
    select(variant)
    for kind in kinds(headdim, causal, seqlen, direction):
        configs.OVERRIDES[kind] = tile_of(kind, headdim, causal, seqlen)
    q, k, v, dout = benchmark_inputs(headdim, 256, tokens=4096)
    params = AttnParams(headdim ** -0.5, Window.from_args(causal, (-1, -1)), 0.0, False)
    out, lse = launch.forward(q, k, v, params, None)
    if direction == "bwd":
        launch.backward(dout, q, k, v, out, lse, None, params, None)
    torch.cuda.synchronize()
    return "ok"


def precompile(jobs: list[tuple], workers: int) -> None:
    """Compile every (variant, shape) in parallel processes first: the timed process then only loads kernels."""
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(min(workers, len(jobs)), mp_context=ctx) as pool:
        concurrent.futures.wait([pool.submit(_warm, job) for job in jobs])  # failures resurface when measured


def measure(headdim: int, seqlen: int, causal: bool, variants: list[str], iters: int, reps: int,
            direction: str = "bwd") -> list[dict]:
    q, k, v, dout = benchmark_inputs(headdim, seqlen)
    params = AttnParams(headdim ** -0.5, Window.from_args(causal, (-1, -1)), 0.0, False)
    names = ("out", "lse") if direction == "fwd" else ("dq", "dk", "dv")
    select(variants[0])
    out, lse = launch.forward(q, k, v, params, None)
    if direction == "fwd":
        def run():
            return launch.forward(q, k, v, params, None)
    else:
        def run():
            return launch.backward(dout, q, k, v, out, lse, None, params, None)
    pinned_results = run()
    pinned_tiles = {kind: vars(tile_of(kind, headdim, causal, seqlen)) for kind in kinds(headdim, causal, seqlen,
                                                                                          direction)}
    pinned_exact = not launch.ATOMIC_DQ
    pinned_orientation = launch.DKDV_QUERY_MAJOR
    flops = attention_flops(q.shape[0], q.shape[2], seqlen, seqlen, headdim, causal=causal, direction=direction)
    rows, kernels_seen = [], []
    for variant in variants:
        select(variant)
        tiles = {kind: vars(tile_of(kind, headdim, causal, seqlen)) for kind in kinds(headdim, causal, seqlen,
                                                                                       direction)}
        row = dict(variant=variant, headdim=headdim, seqlen=seqlen, causal=causal, direction=direction, tiles=tiles)
        kernels = (row["tiles"], *launch_flags())
        if kernels in kernels_seen:
            continue  # the same kernels as an earlier variant at this shape
        kernels_seen.append(kernels)
        try:
            row["check"] = bench.check(lambda *a: flash_attn_func(*a[:3], causal=a[3], backend="triton"),
                                       q, k, v, dout, causal, grads=direction == "bwd")
            results = run()
            row["diff_to_pinned"] = {name: ((g.float() - p.float()).abs().max() / p.float().abs().max()).item()
                                     for name, g, p in zip(names, results, pinned_results)}
            # the same tiles and score orientation: the same products in the same order (row stats and descriptor
            # loads change no value), so bitwise; another orientation or tile may round differently
            exact = (pinned_exact and not launch.ATOMIC_DQ and row["tiles"] == pinned_tiles
                     and launch.DKDV_QUERY_MAJOR == pinned_orientation)
            limit = 0.0 if exact else MAX_DIFF_TO_PINNED
            row["ok"] = row["check"]["ok"] and max(row["diff_to_pinned"].values()) <= limit
            ms = bench.time_ms([run], iters, reps)
            row["ms"], row["tflops"] = ms, flops / ms / 1e9
        except Exception as error:  # a candidate that fails to compile or launch is a result too
            row["error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"
        rows.append(row)
        print(json.dumps(row), flush=True)
    select(variants[0])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", nargs="+", default=VARIANTS)
    parser.add_argument("--headdims", nargs="+", type=int, default=[128, 64, 256])
    parser.add_argument("--seqlens", nargs="+", type=int, default=[2048, 8192])
    parser.add_argument("--causal", choices=["both", "yes", "no"], default="both")
    parser.add_argument("--direction", choices=["bwd", "fwd"], default="bwd",
                        help="time launch.backward (delta + dK/dV + dQ kernels) or launch.forward")
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--precompile", type=int, default=8, metavar="WORKERS",
                        help="compile in this many processes first (0: compile while measuring)")
    parser.add_argument("--json", type=Path, default=Path(os.environ.get("OUT", ".")) / "triton_tile_ab.json")
    args = parser.parse_args()
    for variant in args.variants:
        select(variant)  # refuses an unknown name before any GPU work
    causals = {"both": (False, True), "yes": (True,), "no": (False,)}[args.causal]
    if args.precompile:
        jobs = {}
        for job in ((v, d, s, c, args.direction) for v in args.variants for d in args.headdims for s in args.seqlens
                    for c in causals):
            select(job[0])  # one job per distinct set of kernels
            kernels = (job[1], job[3], *launch_flags(), *(tile_of(kind, job[1], job[3], job[2])
                                                          for kind in kinds(job[1], job[3], job[2], args.direction)))
            jobs.setdefault(kernels, job)
        select(args.variants[0])
        precompile(list(jobs.values()), args.precompile)
    rows = []
    for headdim in args.headdims:
        for seqlen in args.seqlens:
            for causal in causals:
                rows += measure(headdim, seqlen, causal, args.variants, args.iters, args.reps, args.direction)
    args.json.write_text(json.dumps(dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__,
                                         triton=__import__("triton").__version__, rows=rows), indent=1))
    pinned = {(r["headdim"], r["seqlen"], r["causal"]): r.get("tflops") for r in rows
              if r["variant"] == args.variants[0]}
    heads = ("fwd tile", "-") if args.direction == "fwd" else ("dK/dV tile", "dQ tile")
    print(f"| variant | d | seqlen | causal | {heads[0]} | {heads[1]} | {args.direction} TFLOP/s | "
          f"vs {args.variants[0]} | check |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        named = {kind: "x".join(str(x) for x in tile.values()) for kind, tile in r["tiles"].items()}
        # the key-block kernels' tiles in one column (dv + dk for the output split), then dQ's (or "fused")
        tiles = ["+".join(t for kind, t in named.items() if kind != "dq"),
                 named.get("dq", "-" if args.direction == "fwd" else "fused")]
        base = pinned.get((r["headdim"], r["seqlen"], r["causal"]))
        speed = f"{r['tflops']:.0f}" if "tflops" in r else r.get("error", "?")
        ratio = f"{r['tflops'] / base:.3f}" if "tflops" in r and base else "-"
        print(f"| {r['variant']} | {r['headdim']} | {r['seqlen']} | {'yes' if r['causal'] else 'no'} | {tiles[0]} | "
              f"{tiles[1]} | {speed} | {ratio} | {'ok' if r.get('ok') else 'FAIL'} |")


if __name__ == "__main__":
    main()
