"""Compile the fused FP8 quantization pass (fa3nn.backends.triton.quantize) for sm_90a without a GPU and count its
SASS per rotation precision: what the Hadamard rotation of Q and K costs in instructions, before any timing.

Runs quantize_fused on small CPU bf16 tensors with the benchmark's recipe (PerTileScaling(): 128-row scale tiles,
incoherent processing; nheads * headdim = 2048), records the kernel launches instead of running them (SOFTWARE_CAST
set to the GPU's False) and compiles each with scripts/triton_offline_compile.compile_offline. The kernel is
straight-line code per program (the GEMM's k-loop is a static_range); quantize_fused makes two launches, Q's and
K's + V's (one rotated branch in each: Q, K), so

  rot/row   the rotation's warp instructions per row of Q or K: (SASS - SASS of the same launch with ROTATE=False)
            x warps / rows per program, i.e. what each program issues on top of the unrotated pass
  mma       tensor-core instructions (HGMMA + HMMA) in the kernel
  falu      FADD + FMUL + FFMA
  shared    LDS + STS + LDSM + STSM (layout conversions and GEMM operand staging go through shared memory)
  shfl      SHFL (warp shuffles)

    python scripts/quantize_offline_compile.py --headdims 64 128             # tf32x3 ieee fwht
    python scripts/quantize_offline_compile.py --headdims 256 --precisions tf32x3 fwht  # ieee: ~10 min to compile
    PYTHONPATH=/tmp/triton36:$PWD python scripts/quantize_offline_compile.py --precisions tf32x3 fwht  # Triton 3.6
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import triton  # noqa: E402
from triton_offline_compile import WIDTH, _cuobjdump, _ptxas_version, compile_offline  # noqa: E402

from fa3nn import PerTileScaling  # noqa: E402
from fa3nn.backends.triton import quantize  # noqa: E402
from fa3nn.fp8 import make_state  # noqa: E402
from fa3nn.fp8.quantize import recipe_arguments  # noqa: E402

KERNEL = "_quantize_qkv_kernel"
RES_USAGE = re.compile(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)")
OPCODE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)")
GROUPS = {"mma": ("HGMMA", "HMMA"), "falu": ("FADD", "FMUL", "FFMA"), "shared": ("LDS", "STS", "LDSM", "STSM"),
          "shfl": ("SHFL",)}


def record_launches(headdim: int, precision: str, seqlen: int = 256) -> list[tuple[tuple, dict]]:
    """(args, kwargs) of each launch quantize_fused makes for the default recipe with this rotation precision."""
    nheads = WIDTH // headdim
    q, k, v = (torch.zeros(1, seqlen, nheads, headdim, dtype=torch.bfloat16) for _ in range(3))
    recipe = PerTileScaling()
    arguments = recipe_arguments(recipe, make_state(recipe), q, k, v)
    sink: list = []

    class Recorder:
        def __getitem__(self, grid):
            return lambda *args, **kw: sink.append((args, dict(kw, SOFTWARE_CAST=False)))

    saved = quantize._quantize_qkv_kernel
    quantize._quantize_qkv_kernel = Recorder()
    try:
        quantize.quantize_fused(q, k, v, **arguments, rotate_precision=precision)
    finally:
        quantize._quantize_qkv_kernel = saved
    return sink


def opcode_counts(sass: str) -> dict:
    """sass: SASS instructions in a cuobjdump listing (predicates skipped, modifiers dropped), then GROUPS."""
    opcodes = OPCODE.findall(sass)
    return dict(sass=len(opcodes), **{group: sum(opcodes.count(name) for name in names)
                                      for group, names in GROUPS.items()})


def count(args: tuple, kwargs: dict) -> dict:
    compiled = compile_offline(KERNEL, args, kwargs, module=quantize)
    cubin = compiled.asm["cubin"]
    regs, stack, _, local = (int(x) for x in RES_USAGE.search(_cuobjdump("-res-usage", cubin=cubin)).groups())
    return dict(regs=regs, n_spills=(stack + local) // 4, warps=kwargs["num_warps"], rows=kwargs["ROWS_Q"],
                store=kwargs["STORE"], smem_kb=round(compiled.metadata.shared / 1024, 1),
                **opcode_counts(_cuobjdump("-sass", cubin=cubin)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--headdims", nargs="+", type=int, default=[64, 128, 256])
    parser.add_argument("--precisions", nargs="+", choices=quantize.ROTATE_PRECISIONS,
                        default=list(quantize.ROTATE_PRECISIONS))
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    print(f"triton {triton.__version__}, {_ptxas_version()}, target sm_90a", file=sys.stderr)
    rows = []
    for headdim in args.headdims:
        for precision in args.precisions:
            for index, (launch_args, kwargs) in enumerate(record_launches(headdim, precision)):
                row = count(launch_args, kwargs)
                base = count(launch_args, dict(kwargs, ROTATE=False))
                extra = row["sass"] - base["sass"]  # one rotated branch per launch (Q; K)
                row.update(headdim=headdim, precision=precision, launch=index, sass_unrotated=base["sass"],
                           rot_per_row=round(extra * row["warps"] / row["rows"], 1))
                rows.append(row)
                print(row, file=sys.stderr, flush=True)
    if args.json:
        args.json.write_text(json.dumps(dict(triton=triton.__version__, target="sm_90a", rows=rows), indent=1))
    keys = ("regs", "n_spills", "warps", "rows", "sass", "sass_unrotated", "rot_per_row", "mma", "falu", "shared",
            "shfl", "smem_kb")
    print("| d | rotation | launch | " + " | ".join(keys) + " |")
    print("|---" * (len(keys) + 3) + "|")
    for r in rows:
        launch = f"{r['launch']}{'' if r['store'] else ' (amax)'}"
        print(f"| {r['headdim']} | {r['precision']} | {launch} | " + " | ".join(str(r[k]) for k in keys) + " |")


if __name__ == "__main__":
    main()
