"""Where a tile's time goes in the native backward's main kernel: a measurement build (kernels/hopper/
flash_bwd_trace.cuh, built with `python -m fa3nn.backends.hopper_build --define FA3NN_BWD_TRACE --out PATH`) records
%globaltimer at six points of each of the first 16 tiles of CTAs 0-131 (the first consumer warpgroup's leader); this
script runs one backward per shape through that build and prints the medians over CTAs and tiles 1-14 of each phase:

    kv wait       tile start -> its K/V arrived (persistent: the load issued after the previous tile's kv_free)
    first stage   K/V -> the first ring stage arrived
    loop / step   first stage -> after the last step, per step (d128's overlap: before the tile's final dQ)
    final dQ      -> kv_free arrive (d128: the final dQ GEMM and its wait; the default consumer: ~0)
    epilogue      -> dK / dV stores issued (the last dQ hand-off and the stores)
    gap           -> the next tile's start (zeroing dK / dV, loop overhead)

Shapes of the FlashAttention-3 paper (batch x seqlen = 16384 tokens, nheads x headdim = 2048), bf16, non-causal, MHA.

    python scripts/bwd_trace.py --trace-lib build/trace/libfa3nn_hopper.so --json out.json [--seqlens 512 16384]
    python scripts/bwd_trace.py --trace-lib ... --headdims 192 --headdim-v 128    # multi-head latent attention
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bwd_prepost_ab import backward_inputs, check_headdim_v  # noqa: E402

from fa3nn.backends import hopper_build, hopper_bwd  # noqa: E402

CTAS, TILES, EVENTS = 132, 16, 6  # flash_bwd_trace.cuh: kBwdTraceCtas, kBwdTraceTiles, kTraceEvents
PHASES = ("kv_wait", "first_stage", "loop", "final_dq", "epilogue")


def read_trace(lib, headdim: int) -> np.ndarray:
    buffer = (ctypes.c_uint64 * (CTAS * TILES * EVENTS))()
    reader = getattr(lib, f"fa3nn_hopper_bwd_trace_d{headdim}")
    reader.argtypes, reader.restype = [ctypes.POINTER(ctypes.c_uint64)], ctypes.c_int
    if reader(buffer) != 0:
        raise RuntimeError("reading the trace failed")
    return np.frombuffer(buffer, dtype=np.uint64).reshape(CTAS, TILES, EVENTS).astype(np.int64)


def phases(trace: np.ndarray, steps: int) -> dict:
    """Median microseconds per phase over CTAs and tiles 1..TILES-2 that were recorded (and their next tile)."""
    out: dict = {name: [] for name in (*PHASES, "gap")}
    for cta in trace:
        for i in range(1, TILES - 1):
            t, nxt = cta[i], cta[i + 1]
            if not t.all():
                continue
            out["kv_wait"].append(t[1] - t[0])
            out["first_stage"].append(t[2] - t[1])
            out["loop"].append((t[3] - t[2]) / steps)
            out["final_dq"].append(t[4] - t[3])
            out["epilogue"].append(t[5] - t[4])
            if nxt.all():
                out["gap"].append(nxt[0] - t[5])
    return {name: (statistics.median(v) / 1e3 if v else None) for name, v in out.items()} | {
        "tiles": len(out["loop"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trace-lib", type=Path, required=True)
    parser.add_argument("--headdims", nargs="+", type=int, default=[128, 64])
    parser.add_argument("--headdim-v", type=int, default=None,
                        help="V's head dim when it differs from q / k's (MLA: --headdims 192 --headdim-v 128)")
    parser.add_argument("--seqlens", nargs="+", type=int, default=[512, 2048, 16384])
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    check_headdim_v(parser, args)
    lib = hopper_build.load(args.trace_lib)
    rows = []
    for headdim in args.headdims:
        block_m = 128 if hopper_bwd.DEFAULT_VARIANTS[headdim] == "m128" else 64
        for seqlen in args.seqlens:
            inputs, _ = backward_inputs(headdim, seqlen, False, headdim_v=args.headdim_v)
            hopper_bwd.launch(*inputs, library=lib, schedule="persistent")
            read_trace(lib, headdim)  # the warm-up's records, discarded (and the buffer zeroed)
            hopper_bwd.launch(*inputs, library=lib, schedule="persistent")
            row = dict(headdim=headdim, seqlen=seqlen, steps=seqlen // block_m,
                       **phases(read_trace(lib, headdim), seqlen // block_m))
            rows.append(row)
            print(row, file=sys.stderr, flush=True)
    if args.json:
        args.json.write_text(json.dumps(dict(device=torch.cuda.get_device_name(), rows=rows), indent=1))
    print("| d | seqlen | steps / tile | " + " | ".join(f"{p} us" for p in PHASES) + " | gap us | tiles |")
    print("|---|---|---|" + "---|" * (len(PHASES) + 2))
    for r in rows:
        cells = " | ".join("-" if r[p] is None else f"{r[p]:.2f}" for p in (*PHASES, "gap"))
        print(f"| {r['headdim']} | {r['seqlen']} | {r['steps']} | {cells} | {r['tiles']} |")


if __name__ == "__main__":
    main()
