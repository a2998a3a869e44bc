"""Time the Triton FP8 forward kernel against another version of fp8_kernels.py, in one process on one GPU.

The other version (--before FILE, e.g. `git show HEAD~1:fa3nn/backends/triton/fp8_kernels.py > before.py`) is loaded
as its own module and swapped into fp8_launch for its timings, so both run through the same launcher, operands and
tiles. Kernel only (the quantization pass runs once per input set, untimed), the benchmark's shapes (bf16 inputs,
batch * seqlen = 16384 tokens, nheads * headdim = 2048, PerTileScaling without the rotation, which the kernel does
not see), median of --reps batches of --iters calls, input sets rotated. Each tile of --tiles (default:
fp8_launch.FP8_FWD of the head dim, those that fit its K/V descale tiles) is timed in both versions; the outputs of
the two are compared (max abs difference) before timing. Without --before only the library's kernel is timed (a
tile sweep).
Writes $OUT/fp8_triton_ab.json and prints a table last.

    python scripts/fp8_triton_ab.py --before before.py --headdims 128 256 --seqlens 2048 16384
    python scripts/fp8_triton_ab.py --headdims 128 --tiles 64x64x4x3 128x128x8x3
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from fa3nn.backends.triton import fp8_launch  # noqa: E402
from fa3nn.backends.triton.configs import Tile  # noqa: E402
from fa3nn.fp8 import PerTileScaling  # noqa: E402
from fa3nn.fp8.operands import to_operands  # noqa: E402
from fa3nn.fp8.quantize import quantize_qkv  # noqa: E402
from fa3nn.masks import Window  # noqa: E402
from fa3nn.metrics import attention_flops  # noqa: E402


def _load(path: Path):
    spec = importlib.util.spec_from_file_location("fp8_kernels_before", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _time_ms(calls, iters: int, reps: int) -> float:
    for call in calls:
        call()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(iters):
            calls[i % len(calls)]()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / iters)
    return sorted(times)[len(times) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path, default=None, help="the other fp8_kernels.py (omit: sweep only)")
    parser.add_argument("--headdims", nargs="+", type=int, default=[128])
    parser.add_argument("--seqlens", nargs="+", type=int, default=[2048, 16384])
    parser.add_argument("--causal", choices=["no", "yes", "both"], default="both")
    parser.add_argument("--tiles", nargs="*", default=None, help="MxNxWxS (default: the head dim's table)")
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--rotate", type=int, default=2)
    parser.add_argument("--json", type=Path, default=Path(os.environ.get("OUT", ".")) / "fp8_triton_ab.json")
    args = parser.parse_args()
    library = fp8_launch._fp8_fwd_kernel
    versions = ((("before", _load(args.before)._fp8_fwd_kernel),) if args.before else ()) + (("after", library),)
    rows = []
    for headdim in args.headdims:
        nheads = 2048 // headdim
        for seqlen in args.seqlens:
            batch = max(1, 16384 // seqlen)
            sets = []
            for _ in range(args.rotate):
                q, k, v = (torch.randn(batch, seqlen, nheads, headdim, device="cuda", dtype=torch.bfloat16)
                           for _ in range(3))
                sets.append(to_operands(quantize_qkv(q, k, v, PerTileScaling(incoherent=False))))
            for causal in {"no": [False], "yes": [True], "both": [False, True]}[args.causal]:
                window = Window.from_args(causal, (-1, -1))
                flops = attention_flops(batch, nheads, seqlen, seqlen, headdim, causal=causal, direction="fwd")
                tiles = ([Tile(*(int(x) for x in t.split("x"))) for t in args.tiles] if args.tiles
                         else fp8_launch.fp8_tiles(headdim, sets[0].block_k, seqlen, causal))
                for tile in tiles:
                    def call(ops, tile=tile, scale=headdim ** -0.5, window=window):
                        return fp8_launch.forward_fp8(ops.q, ops.k, ops.vt, ops.q_descale, ops.k_descale,
                                                      ops.v_descale, ops.block_q, ops.block_k, scale, window, None,
                                                      None, None, None, torch.bfloat16, tile=tile)

                    row = dict(headdim=headdim, seqlen=seqlen, causal=causal, tile=str(tile))
                    outs = {}
                    for name, kernel in versions:
                        fp8_launch._fp8_fwd_kernel = kernel
                        try:
                            outs[name] = call(sets[0])[0].float()
                            ms = _time_ms([lambda o=o: call(o) for o in sets], args.iters, args.reps)
                            row[name] = round(flops / ms / 1e9, 1)
                        except Exception as exc:  # a tile that does not fit is recorded, not fatal
                            row[name] = f"{type(exc).__name__}: {str(exc)[:100]}"
                        finally:
                            fp8_launch._fp8_fwd_kernel = library
                    if len(outs) == 2:
                        row["max_abs_diff"] = float((outs["before"] - outs["after"]).abs().max())
                    rows.append(row)
                    print(row, flush=True)
    args.json.write_text(json.dumps(dict(gpu=torch.cuda.get_device_name(), rows=rows), indent=1))
    print("| d | seqlen | causal | tile | before TFLOP/s | after TFLOP/s | ratio | max abs diff |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        before = r.get("before", "-")
        ratio = (f"{r['after'] / before:.2f}" if isinstance(before, float) and isinstance(r["after"], float) else "-")
        print(f"| {r['headdim']} | {r['seqlen']} | {'yes' if r['causal'] else 'no'} | {r['tile']} | {before} | "
              f"{r['after']} | {ratio} | {r.get('max_abs_diff', '-')} |")


if __name__ == "__main__":
    main()
