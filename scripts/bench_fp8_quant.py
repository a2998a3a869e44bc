"""Time the fused FP8 quantization pass (fa3nn.backends.triton.quantize.quantize_fused) per Hadamard rotation
precision, and without rotation, as `flash_attn_func(fp8="per_tile")` runs it: recipe PerTileScaling() (128-row Q
scale tiles, K/V tiles of the native key block per head dim or --block-k rows, incoherent processing), bf16 at the
FlashAttention-3 paper's shapes (batch x seqlen = 16384 tokens, nheads x headdim = 2048). Timing is
scripts/bench.py's time_ms (the "quant ms" columns of its FP8 rows).

Before timing, each precision's e4m3 Q and K and their descales are compared with the same pass run on Q R and K R
rotated in fp64 and rounded once to fp32 (rotation=None): the fraction of e4m3 values that differ and the descales'
max relative difference. The GPU tests hold the pass to tests/fp8_kernel_checks.py's rules; these numbers say
which precision sits closer to the exact rotation ("fwht" should not be farther than "tf32x3").

    python scripts/bench_fp8_quant.py --json out.json [--headdims 128 256 64] [--seqlens 16384 8192]
        [--precisions tf32x3 fwht]

"ieee" (fp32 FMA GEMM) is timed at head dims <= 128 only: at 256 Triton takes minutes to compile it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import TOKENS, WIDTH, time_ms  # noqa: E402

from fa3nn import PerTileScaling  # noqa: E402
from fa3nn.backends.triton.quantize import ROTATE_PRECISION, ROTATE_PRECISIONS, quantize_fused  # noqa: E402
from fa3nn.fp8 import make_state  # noqa: E402
from fa3nn.fp8.quantize import recipe_arguments  # noqa: E402


def distance(got, exact) -> dict:
    """How far one precision's operands are from the fp64 rotation's (module docstring)."""
    result = {}
    for name in ("q", "k"):
        a, b = getattr(got, name).float(), getattr(exact, name).float()
        result[f"{name}_changed"] = ((a != b) & ~(a.isnan() & b.isnan())).float().mean().item()
        da, db = getattr(got, f"{name}_descale"), getattr(exact, f"{name}_descale")
        result[f"{name}_descale_max_rel"] = ((da - db).abs() / db).max().item()
    return result


def bench_shape(headdim: int, seqlen: int, args) -> list[dict]:
    batch, nheads = TOKENS // seqlen, WIDTH // headdim
    q, k, v = (torch.randn(batch, seqlen, nheads, headdim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    recipe = PerTileScaling(block_k=args.block_k)
    arguments = recipe_arguments(recipe, make_state(recipe), q, k, v)
    rotation = arguments.pop("rotation")
    rotated = [(x.double() @ rotation.double()).float() for x in (q, k)]
    exact = quantize_fused(*rotated, v, **arguments, rotation=None)
    del rotated
    variants = {p: dict(rotation=rotation, rotate_precision=p) for p in args.precisions
                if p != "ieee" or headdim <= 128}
    variants["none"] = dict(rotation=None)
    rows = []
    for name, extra in variants.items():
        row = dict(headdim=headdim, seqlen=seqlen, batch=batch, nheads=nheads, rotation=name,
                   default=name == ROTATE_PRECISION)
        try:
            call = lambda extra=extra: quantize_fused(q, k, v, **arguments, **extra)  # noqa: E731
            if name != "none":
                row.update(distance(call(), exact))
            row["ms"] = time_ms([call], args.iters, args.reps)
        except Exception as error:  # a variant that fails to compile or run is a result too
            row["error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"
        rows.append(row)
        print(row, file=sys.stderr, flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--headdims", nargs="+", type=int, default=[128, 256, 64])
    parser.add_argument("--seqlens", nargs="+", type=int, default=[16384, 8192])
    parser.add_argument("--precisions", nargs="+", choices=ROTATE_PRECISIONS, default=list(ROTATE_PRECISIONS))
    parser.add_argument("--block-k", type=int, default=None,
                        help="K/V rows per scale (default: the recipe's, the native key block per head dim)")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    rows = []
    for headdim in args.headdims:
        for seqlen in args.seqlens:
            rows += bench_shape(headdim, seqlen, args)
            if args.json:  # after every shape: a timeout keeps what was measured
                args.json.write_text(json.dumps(dict(device=torch.cuda.get_device_name(), torch=torch.__version__,
                                                     rows=rows), indent=1))
    print("| d | seqlen | rotation | quant ms | x no rotation | Q e4m3 changed vs fp64 | K changed | "
          "Q descale max rel | K descale max rel |")
    print("|---|---|---|---|---|---|---|---|---|")
    none = {(r["headdim"], r["seqlen"]): r.get("ms") for r in rows if r["rotation"] == "none"}
    for r in rows:
        name = r["rotation"] + (" (default)" if r["default"] else "")
        if "error" in r:
            print(f"| {r['headdim']} | {r['seqlen']} | {name} | {r['error']} |||||")
            continue
        base = none.get((r["headdim"], r["seqlen"]))
        cells = [f"{r['ms']:.3f}", f"{r['ms'] / base:.2f}" if base else "x"]
        cells += [f"{r[key]:.2e}" if key in r else "-" for key in ("q_changed", "k_changed", "q_descale_max_rel",
                                                                   "k_descale_max_rel")]
        print(f"| {r['headdim']} | {r['seqlen']} | {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
