"""Time the Triton backward with each tile table (configs.PINNED and configs.CANDIDATE_TABLES) side by side on
one GPU, after checking each table's gradients.

For every (head dim, seqlen, causal) at the benchmark's shapes (bf16, batch * seqlen = 16384 tokens, nheads * head
dim = 2048) and every table named in --tables:
  1. check: fa3nn's reference on batch 0, heads 0-1 (scripts/bench.py's check), and the full-shape gradients
     against the "pinned" table's (max |difference| / max |pinned| per gradient): a candidate tile only changes the
     summation order, so anything above 2e-2 is a bug, not rounding;
  2. time launch.backward alone (delta + dK/dV + dQ kernels) with bench.py's event timing, the tables one after
     the other on the same inputs. A table whose tiles equal the pinned ones at a shape is not re-timed.
Writes $OUT/triton_tile_ab.json (or --json) and prints a table last: TFLOP/s and the ratio to "pinned".

    python scripts/triton_tile_ab.py                                   # pinned vs every candidate table
    python scripts/triton_tile_ab.py --tables pinned least-spill --headdims 128 --seqlens 2048 8192
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bench  # noqa: E402  (scripts/bench.py: check and time_ms)
import torch  # noqa: E402

from fa3nn import flash_attn_func  # noqa: E402
from fa3nn.backends.base import AttnParams  # noqa: E402
from fa3nn.backends.triton import configs, launch  # noqa: E402
from fa3nn.masks import Window  # noqa: E402
from fa3nn.metrics import attention_flops  # noqa: E402

MAX_DIFF_TO_PINNED = 2e-2


def _inputs(headdim: int, seqlen: int, tokens: int = 16384, width: int = 2048):
    batch, nheads = max(1, tokens // seqlen), max(1, width // headdim)
    return [torch.randn(batch, seqlen, nheads, headdim, device="cuda", dtype=torch.bfloat16) for _ in range(4)]


def measure(headdim: int, seqlen: int, causal: bool, tables: list[str], iters: int, reps: int) -> list[dict]:
    q, k, v, dout = _inputs(headdim, seqlen)
    params = AttnParams(headdim ** -0.5, Window.from_args(causal, (-1, -1)), 0.0, False)
    configs.TILE_TABLE = "pinned"
    out, lse = launch.forward(q, k, v, params, None)
    pinned_grads = launch.backward(dout, q, k, v, out, lse, None, params, None)
    flops = attention_flops(q.shape[0], q.shape[2], seqlen, seqlen, headdim, causal=causal, direction="bwd")
    rows = []
    for table in tables:
        configs.TILE_TABLE = table
        row = dict(table=table, headdim=headdim, seqlen=seqlen, causal=causal,
                   tiles={kind: vars(configs.pinned(kind, headdim, causal, seqlen)) for kind in ("dkdv", "dq")})
        if table != "pinned" and rows and row["tiles"] == rows[0]["tiles"]:
            continue  # same kernels as the pinned row (tables[0] is "pinned")
        try:
            row["check"] = bench.check(lambda *a: flash_attn_func(*a[:3], causal=a[3], backend="triton"),
                                       q, k, v, dout, causal)
            grads = launch.backward(dout, q, k, v, out, lse, None, params, None)
            row["diff_to_pinned"] = {name: ((g.float() - p.float()).abs().max() / p.float().abs().max()).item()
                                     for name, g, p in zip(("dq", "dk", "dv"), grads, pinned_grads)}
            row["ok"] = row["check"]["ok"] and max(row["diff_to_pinned"].values()) <= MAX_DIFF_TO_PINNED
            ms = bench.time_ms([lambda: launch.backward(dout, q, k, v, out, lse, None, params, None)], iters, reps)
            row["bwd_ms"], row["bwd_tflops"] = ms, flops / ms / 1e9
        except Exception as error:  # a candidate that fails to compile or launch is a result too
            row["error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"
        rows.append(row)
        print(json.dumps(row), flush=True)
    configs.TILE_TABLE = "pinned"
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", nargs="+", default=["pinned", *configs.CANDIDATE_TABLES])
    parser.add_argument("--headdims", nargs="+", type=int, default=[128, 64, 256])
    parser.add_argument("--seqlens", nargs="+", type=int, default=[2048, 8192])
    parser.add_argument("--causal", choices=["both", "yes", "no"], default="both")
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--json", type=Path, default=Path(os.environ.get("OUT", ".")) / "triton_tile_ab.json")
    args = parser.parse_args()
    if args.tables[0] != "pinned":
        parser.error("--tables must start with pinned (the baseline every other table is compared with)")
    for name in args.tables:
        configs.TILE_TABLE = name
        configs.tile_table("dkdv")  # refuses an unknown name before any GPU work
    causals = {"both": (False, True), "yes": (True,), "no": (False,)}[args.causal]
    rows = []
    for headdim in args.headdims:
        for seqlen in args.seqlens:
            for causal in causals:
                rows += measure(headdim, seqlen, causal, args.tables, args.iters, args.reps)
    args.json.write_text(json.dumps(dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__,
                                         triton=__import__("triton").__version__, rows=rows), indent=1))
    pinned = {(r["headdim"], r["seqlen"], r["causal"]): r.get("bwd_tflops") for r in rows if r["table"] == "pinned"}
    print("| table | d | seqlen | causal | dK/dV tile | dQ tile | bwd TFLOP/s | vs pinned | check |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        tiles = ["x".join(str(x) for x in r["tiles"][kind].values()) for kind in ("dkdv", "dq")]
        base = pinned.get((r["headdim"], r["seqlen"], r["causal"]))
        speed = f"{r['bwd_tflops']:.0f}" if "bwd_tflops" in r else r.get("error", "?")
        ratio = f"{r['bwd_tflops'] / base:.3f}" if "bwd_tflops" in r and base else "-"
        print(f"| {r['table']} | {r['headdim']} | {r['seqlen']} | {'yes' if r['causal'] else 'no'} | {tiles[0]} | "
              f"{tiles[1]} | {speed} | {ratio} | {'ok' if r.get('ok') else 'FAIL'} |")


if __name__ == "__main__":
    main()
