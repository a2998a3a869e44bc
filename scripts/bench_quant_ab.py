"""A/B of the fused FP8 quantization pass (fa3nn.backends.triton.quantize.quantize_fused) against an earlier copy of
its module, on the GPU: which outputs are not bitwise identical (e4m3 Q, K, Vᵀ, descales, amaxes; NaN equal to NaN),
then both timed with scripts/bench.py's time_ms (a sleep sized from the host's enqueue time, so the device time is
measured even where one Python call of the pass takes longer to enqueue than to run), in `--rounds` alternating
rounds whose medians are reported.

    cp fa3nn/backends/triton/quantize.py build/quant_before/quantize_before.py   # before the change
    python scripts/bench_quant_ab.py --before build/quant_before/quantize_before.py --json out.json \
        [--headdims 128 256] [--seqlens 512 2048 16384] [--warps 16]

Shapes are the FA3 paper's (batch x seqlen = 16384 tokens, nheads x headdim = 2048, bf16) with the default recipe's
arguments (PerTileScaling: 128-row Q tiles, the native key block for K/V, the Hadamard rotation). `--warps N` adds a
variant of the new module launched with N warps per program. The bitwise check also runs on inputs holding NaN and
+-Inf, and on a varlen batch of odd lengths.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import TOKENS, WIDTH, time_ms  # noqa: E402

import fa3nn.backends.triton.quantize as new  # noqa: E402
from fa3nn import PerTileScaling  # noqa: E402
from fa3nn.fp8 import make_state  # noqa: E402
from fa3nn.fp8.quantize import recipe_arguments  # noqa: E402

FIELDS = ("q", "k", "vt", "q_descale", "k_descale", "v_descale", "amax")


def load_module(path: str):
    spec = importlib.util.spec_from_file_location("quantize_before", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def differences(a, b) -> list[str]:
    """Names of the FP8Operands fields that are not bitwise equal (e4m3 compared as bytes, NaN equal to NaN)."""
    bad = []
    for name in FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        if x.dtype.itemsize == 1:
            x, y = x.view(torch.uint8), y.view(torch.uint8)
        same = x.shape == y.shape and bool(((x == y) | (x.isnan() & y.isnan()) if x.is_floating_point()
                                            else (x == y)).all())
        if not same:
            bad.append(name)
    return bad


def with_warps(warps: int | None):
    """The new module's launcher with `warps` warps per program (None: its own rule)."""
    def call(*args, **kwargs):
        saved = new._num_warps
        if warps is not None:
            new._num_warps = lambda rows, block_d: warps
        try:
            return new.quantize_fused(*args, **kwargs)
        finally:
            new._num_warps = saved
    return call


def recipe_call(q, k, v):
    recipe = PerTileScaling()
    return recipe_arguments(recipe, make_state(recipe), q, k, v)


def check_special(before, headdim: int) -> dict:
    """Bitwise agreement on inputs with NaN and +-Inf, and on a varlen batch of odd lengths."""
    torch.manual_seed(1)
    nheads = 4
    q, k, v = (torch.randn(2, 700, nheads, headdim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    q[0, 5, 1, 3] = float("nan")
    k[1, 600, 2, 0] = float("inf")
    v[0, 17, 3, 9] = float("-inf")
    v[1, 333, 0, 1] = float("nan")
    args = recipe_call(q, k, v)
    result = {"nan_inf": differences(new.quantize_fused(q, k, v, **args), before.quantize_fused(q, k, v, **args))}
    lengths = torch.tensor([0, 37, 250, 1, 129], device="cuda")
    cu = torch.nn.functional.pad(lengths.cumsum(0), (1, 0)).to(torch.int32)
    total = int(cu[-1])
    q, k, v = (torch.randn(total, nheads, headdim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    args = recipe_call(q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0))
    extra = dict(cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=int(lengths.max()), max_seqlen_k=int(lengths.max()))
    result["varlen"] = differences(new.quantize_fused(q, k, v, **args, **extra),
                                   before.quantize_fused(q, k, v, **args, **extra))
    return result


def bench_shape(before, headdim: int, seqlen: int, args) -> dict:
    batch, nheads = TOKENS // seqlen, WIDTH // headdim
    q, k, v = (torch.randn(batch, seqlen, nheads, headdim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    arguments = recipe_call(q, k, v)
    fns = {"before": lambda: before.quantize_fused(q, k, v, **arguments),
           "new": lambda: with_warps(None)(q, k, v, **arguments)}
    for w in args.warps:
        fns[f"new_{w}w"] = (lambda w=w: with_warps(w)(q, k, v, **arguments))
    reference = fns["before"]()
    mismatches = {name: differences(fn(), reference) for name, fn in fns.items() if name != "before"}
    # First version (2026-12-01, results/quantab-h200-20261201-1802): bench_hopper.time_interleaved with its fixed
    # ~1 ms sleep; 20 calls of the pass take longer to enqueue than that, so it timed the host (0.19-0.43 ms per
    # call where bench.py's time_ms reads 0.12-0.18).
    samples = {name: [] for name in fns}
    for r in range(args.rounds):
        for name in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
            samples[name].append(time_ms([fns[name]], args.iters, args.reps))
    ms = {name: statistics.median(s) for name, s in samples.items()}
    bytes_moved = 3 * q.numel() * 2 + 3 * q.numel()  # bf16 in, e4m3 out (scales and amaxes are a few KB)
    return dict(headdim=headdim, seqlen=seqlen, ms=ms, samples_ms=samples, mismatches=mismatches,
                tb_per_s={name: bytes_moved / t / 1e9 for name, t in ms.items()})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True)
    parser.add_argument("--headdims", type=int, nargs="+", default=[128, 256])
    parser.add_argument("--seqlens", type=int, nargs="+", default=[512, 2048, 16384])
    parser.add_argument("--warps", type=int, nargs="*", default=[])
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", required=True)
    args = parser.parse_args()
    before = load_module(args.before)
    special = {hd: check_special(before, hd) for hd in args.headdims}
    rows = [bench_shape(before, hd, s, args) for hd in args.headdims for s in args.seqlens]
    Path(args.json).write_text(json.dumps(dict(special=special, rows=rows), indent=1))
    print("special-input mismatches (empty = bitwise equal):", special)
    names = list(rows[0]["ms"])
    print("| d | seqlen | " + " | ".join(f"{n} ms" for n in names) + " | new / before | TB/s new | mismatches |")
    print("|---" * (len(names) + 5) + "|")
    for r in rows:
        cells = " | ".join(f"{r['ms'][n]:.4f}" for n in names)
        print(f"| {r['headdim']} | {r['seqlen']} | {cells} | {r['ms']['new'] / r['ms']['before']:.3f} | "
              f"{r['tb_per_s']['new']:.2f} | {r['mismatches']} |")


if __name__ == "__main__":
    main()
