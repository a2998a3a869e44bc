"""Compile the Triton FP8 forward (fa3nn.backends.triton.fp8_kernels) for sm_90a without a GPU, per tile: registers,
spills and the loop's issue cost, as scripts/triton_offline_compile.py does for the bf16 kernels (same columns).

Runs fp8_launch.forward_fp8 on small CPU e4m3 tensors with the benchmark's layout (nheads * headdim = 2048, K/V
descale tiles of --block-k rows), records the launch instead of running it (SOFTWARE_CAST set to the GPU's False)
and compiles it with triton_offline_compile.compile_offline. Use a Triton 3.6 wheel first on PYTHONPATH to read the
H200's numbers (its ptxas differs from newer Triton's).

    PYTHONPATH=/tmp/triton36:$PWD python scripts/fp8_triton_offline_compile.py --headdims 128 256
    python scripts/fp8_triton_offline_compile.py --headdims 256 --tiles 64x64x8x2 64x128x8x2
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import triton  # noqa: E402
from triton_offline_compile import WIDTH, _ptxas_version, compile_offline, parse_tile, resources  # noqa: E402

from fa3nn.backends.triton import fp8_kernels, fp8_launch  # noqa: E402
from fa3nn.backends.triton.configs import Tile  # noqa: E402
from fa3nn.fp8.operands import padded_keys  # noqa: E402
from fa3nn.masks import Window  # noqa: E402


def record_fp8_launch(tile: Tile, headdim: int, causal: bool, block_k: int, seqlen: int = 256) -> tuple:
    """(args, kwargs) of the launch forward_fp8 makes with `tile` at this shape, specialized for the GPU."""
    nheads = WIDTH // headdim
    e4m3 = torch.float8_e4m3fn
    q8, k8 = (torch.zeros(1, seqlen, nheads, headdim, dtype=e4m3) for _ in range(2))
    vt8 = torch.zeros(1, nheads, headdim, padded_keys(seqlen), dtype=e4m3)
    tiles = -(-seqlen // block_k)
    q_descale = torch.ones(1, nheads, -(-seqlen // 128))
    k_descale, v_descale = (torch.ones(1, nheads, tiles) for _ in range(2))
    sink: list = []

    class Recorder:
        def __getitem__(self, grid):
            return lambda *args, **kw: sink.append((args, kw))

    saved = fp8_launch._fp8_fwd_kernel
    fp8_launch._fp8_fwd_kernel = Recorder()
    try:
        fp8_launch.forward_fp8(q8, k8, vt8, q_descale, k_descale, v_descale, 128, block_k, headdim ** -0.5,
                               Window.from_args(causal, (-1, -1)), None, None, None, None, torch.bfloat16, tile=tile)
    finally:
        fp8_launch._fp8_fwd_kernel = saved
    args, kwargs = sink[0]
    return args, dict(kwargs, SOFTWARE_CAST=False)


def run_one(job: dict) -> dict:
    tile = Tile(*job["tile"])
    args, kwargs = record_fp8_launch(tile, job["headdim"], job["causal"], job["block_k"])
    compiled = compile_offline("_fp8_fwd_kernel", args, kwargs, module=fp8_kernels)
    return dict(job, **resources(compiled, tile))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--headdims", nargs="+", type=int, default=[64, 128, 256])
    parser.add_argument("--tiles", nargs="*", type=parse_tile, default=None,
                        help="MxNxWxS tiles (default: the table fp8_launch.FP8_FWD of each head dim and mask)")
    parser.add_argument("--causal", choices=["no", "yes", "both"], default="no")
    parser.add_argument("--block-k", type=int, default=256, help="K/V descale tile rows (BLOCK_N must divide it)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("-j", "--jobs", type=int, default=2)
    args = parser.parse_args()
    causals = {"no": [False], "yes": [True], "both": [False, True]}[args.causal]
    jobs = [dict(headdim=d, causal=c, block_k=args.block_k, tile=(t.block_m, t.block_n, t.num_warps, t.num_stages))
            for d in args.headdims for c in causals for t in (args.tiles or fp8_launch.FP8_FWD[d, c])]
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(run_one, jobs))
    if args.json:
        args.json.write_text(json.dumps(dict(triton=triton.__version__, ptxas=_ptxas_version(), rows=rows), indent=1))
    print(f"Triton {triton.__version__}, {_ptxas_version()}, sm_90a, FP8 forward, K/V descale tiles {args.block_k}")
    print("| d | causal | tile | regs | stack | STL/LDL | hot | loop | w/kscore | smem KB | mma |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        m, n, w, s = r["tile"]
        print(f"| {r['headdim']} | {'yes' if r['causal'] else 'no'} | {m}x{n}x{w}x{s} | {r['regs']} | {r['stack']} | "
              f"{r['stl']}/{r['ldl']} | {r['hot']} | {r['loop']} | {r['per_kscore']} | {r['smem_kb']} | {r['mma']} |")


if __name__ == "__main__":
    main()
