"""Compile the Triton kernels for sm_90a without a GPU and print registers, spills and shared memory per tile.

Triton compiles for any target it has a backend for; only loading the binary needs a driver. This tool runs the
real launchers (fa3nn.backends.triton.launch) on small CPU tensors with the benchmark's layout (bf16, (batch,
seqlen, heads, dim), nheads * headdim = 2048, so every stride the JIT specializes on is a multiple of 16 as on the
GPU), records the kernel launches instead of running them, and hands each recorded call to the same binder and
specialization code the JIT uses, with the target GPUTarget("cuda", 90, 32) (sm_90a). The compiled cubin is then
read with the cuobjdump bundled with Triton:

  regs      registers per thread (255 is the ceiling)
  stack     bytes of stack frame per thread; Triton's `n_spills` on a GPU is (stack + local) / 4
  STL/LDL   local-memory store / load instructions in the SASS (the spill and refill code itself)
  hot       STL + LDL inside the innermost loops that issue tensor-core instructions (the per-tile loop over the
            other sequence): spill code there runs every step, elsewhere once per head or per program
  loop      SASS instructions in the first such loop (the unmasked run: the step the kernel spends its time in)
  w/kscore  that loop's warp instructions per 1024 scores (loop x warps x 1024 / (BLOCK_M x BLOCK_N)): the issue
            cost of one score, comparable across tile shapes (tensor-core and softmax work included)
  smem      dynamic shared memory per program in KB (Triton's metadata.shared: the launch's request; compiling
            does not check it, an H200 refuses more than 227 KB at launch)
  mma       HGMMA (wgmma) or HMMA (mma.sync): which tensor-core instruction the dots became
  sass_md5  (--json only) digest of the SASS instructions: equal digests in two trees = identical kernels

Numbers depend on the Triton version and its bundled ptxas: Triton 3.9 assembles sm_90a with ptxas 13.x, Triton
3.6 (the H200) with ptxas 12.8. To read the H200's numbers here, put a Triton 3.6 wheel first on PYTHONPATH
(`pip install --no-deps --target /tmp/triton36 triton==3.6.0`, then PYTHONPATH=/tmp/triton36:$PWD).

    python scripts/triton_offline_compile.py                               # pinned + candidate tiles, d64/128/256
    python scripts/triton_offline_compile.py --kinds dkdv --headdims 128 --tiles 64x128x8x2 32x128x8x2
    python scripts/triton_offline_compile.py --sets pinned --json out.json -j 2
    FA3NN_TRITON_UNMASKED_ROW_STATS=1 python scripts/triton_offline_compile.py --kinds dkdv   # a launcher option
    python scripts/triton_offline_compile.py --dtype fp32 --sets pinned --json fp32.json   # fp32 inputs
    python scripts/triton_offline_compile.py --softcap 30 --sets pinned --json softcap.json   # soft-capped kernels
    python scripts/triton_offline_compile.py --kinds fwd --sinks --sets pinned   # the forward with attention sinks

The launchers' environment switches apply as in a real run (they are read when fa3nn is imported).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # Triton 3.9 warns when unset; 1 is what 3.6 does
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import triton  # noqa: E402

from fa3nn.backends.base import AttnParams, saved_lse_dtype  # noqa: E402
from fa3nn.backends.triton import configs, launch  # noqa: E402
from fa3nn.backends.triton import kernels as K  # noqa: E402
from fa3nn.backends.triton.configs import Tile  # noqa: E402
from fa3nn.masks import Window  # noqa: E402

KINDS = ("fwd", "dq", *configs.KEY_BLOCK_KINDS)
KERNEL_OF = {"fwd": "_fwd_kernel", "dq": "_bwd_dq_kernel",
             **{kind: "_bwd_dkdv_kernel" for kind in configs.KEY_BLOCK_KINDS}}
TARGET = ("cuda", 90, 32)  # sm_90a (H100/H200), 32 threads per warp
WIDTH = 2048  # nheads * headdim, as in the benchmark
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


@contextlib.contextmanager
def _recorded_launches(sink: list):
    """Swap the launchers' kernels for recorders: `kernel[grid](*args, **kw)` appends (name, args, kw) to sink."""

    class Recorder:
        def __init__(self, name):
            self.name = name
            self.arg_names = saved[name].arg_names  # launch.py names the descriptor arguments by them

        def __getitem__(self, grid):
            return lambda *args, **kw: sink.append((self.name, args, kw))

    names = ("_fwd_kernel", "_bwd_delta_kernel", "_bwd_dkdv_kernel", "_bwd_dq_kernel")
    saved = {name: getattr(K, name) for name in names}
    try:
        for name in names:
            setattr(K, name, Recorder(name))
        yield
    finally:
        for name, kernel in saved.items():
            setattr(K, name, kernel)


def record_launch(kind: str, tile: Tile, headdim: int, causal: bool, seqlen: int = 128, dtype=torch.bfloat16,
                  softcap: float = 0.0, sinks: bool = False):
    """(kernel name, args, kwargs) of the launch launch.py makes for `kind` with `tile` at this shape."""
    nheads = WIDTH // headdim
    q, k, v, dout = (torch.zeros(1, seqlen, nheads, headdim, dtype=dtype) for _ in range(4))
    params = AttnParams(softmax_scale=headdim ** -0.5, window=Window.from_args(causal, (-1, -1)), softcap=softcap,
                        deterministic=False)
    sink: list = []
    saved_env, saved_atomic, saved_split = os.environ.get("FA3NN_TRITON_TMA"), launch.ATOMIC_DQ, launch.DKDV_SPLIT_D
    saved_outputs = launch.DKDV_OUTPUTS
    os.environ["FA3NN_TRITON_TMA"] = "1"  # the forward's H200 path: TMA descriptors
    configs.OVERRIDES.clear()
    configs.OVERRIDES[kind] = tile
    launch.ATOMIC_DQ = kind in configs.ATOMIC_DQ_KINDS
    launch.DKDV_SPLIT_D = str(configs.DKDV_SPLIT_PARTS) if kind in configs.SPLIT_KINDS else "1"
    launch.DKDV_OUTPUTS = "split" if kind in configs.OUTPUT_SPLIT_KINDS else "joint"
    try:
        with _recorded_launches(sink):
            if kind == "fwd":
                launch.forward(q, k, v, params, None, torch.zeros(nheads) if sinks else None)
            else:
                out = torch.zeros_like(q)
                lse = torch.zeros(1, nheads, seqlen, dtype=saved_lse_dtype(dtype))
                launch.backward(dout, q, k, v, out, lse, None, params, None)
    finally:
        configs.OVERRIDES.clear()
        launch.ATOMIC_DQ, launch.DKDV_SPLIT_D, launch.DKDV_OUTPUTS = saved_atomic, saved_split, saved_outputs
        if saved_env is None:
            os.environ.pop("FA3NN_TRITON_TMA", None)
        else:
            os.environ["FA3NN_TRITON_TMA"] = saved_env
    # (WITH_DK, WITH_DV) of the output split's kernels
    wanted = {"dk": (True, False), "dk_dq": (True, False), "dv": (False, True)}.get(kind, (True, True))
    return next(call for call in sink if call[0] == KERNEL_OF[kind]
                and (call[2].get("WITH_DK", True), call[2].get("WITH_DV", True)) == wanted)


def compile_offline(name: str, args: tuple, kwargs: dict, module=K):
    """triton.compile of one recorded launch (of module.<name>) for sm_90a, specialized as the JIT would on a GPU."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import create_function_from_signature

    jit = getattr(module, name)
    target = GPUTarget(*TARGET)
    backend = make_backend(target)
    kwargs = dict(kwargs, debug=False)
    for knob in ("instrumentation_mode", "fpsan_homomorphic_casts"):  # what JITFunction.run adds (Triton 3.9)
        if hasattr(triton.knobs.compilation, knob):
            kwargs[knob] = getattr(triton.knobs.compilation, knob)
    binder = create_function_from_signature(jit.signature, jit.params, backend)
    bound, specialization, options = binder(*args, **kwargs)
    options, signature, constexprs, attrs = jit._pack_args(backend, kwargs, bound, specialization, options)
    return triton.compile(ASTSource(jit, signature, constexprs, attrs), target=target, options=options.__dict__)


RES_USAGE = re.compile(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)")
SASS_LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);")
BRANCH = re.compile(r"\bBRA\s+0x([0-9a-f]+)")
SPILL = re.compile(r"\b(STL|LDL)\b")
MMA = re.compile(r"\b(HGMMA|QGMMA|HMMA)\b")  # QGMMA: the e4m3 wgmma (the FP8 forward)


def hot_loops(sass: str) -> tuple[int, int]:
    """(STL + LDL inside the innermost loops (backward branches) that contain tensor-core instructions, instructions
    of the first such loop)."""
    code = [(int(addr, 16), text) for addr, text in SASS_LINE.findall(sass)]
    loops = [(int(m.group(1), 16), addr) for addr, text in code
             if (m := BRANCH.search(text)) and int(m.group(1), 16) < addr]
    innermost = [(lo, hi) for lo, hi in loops if not any(lo <= a and b <= hi and (a, b) != (lo, hi) for a, b in loops)]
    total, first = 0, 0
    for lo, hi in sorted(innermost):
        body = [text for addr, text in code if lo <= addr <= hi]
        if any(MMA.search(text) for text in body):
            total += sum(1 for text in body if SPILL.search(text))
            first = first or len(body)
    return total, first


def sass_digest(sass: str) -> str:
    """md5 of a listing's instructions in order (addresses, encodings and the header left out): equal digests of
    two compiles = the same SASS."""
    return hashlib.md5("\n".join(text for _, text in SASS_LINE.findall(sass)).encode()).hexdigest()


def _cuobjdump(*flags: str, cubin: bytes) -> str:
    tool = triton.knobs.nvidia.cuobjdump.path
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"fa3nn-offline-{os.getpid()}.cubin"
    path.write_bytes(cubin)
    try:
        return subprocess.run([tool, *flags, str(path)], check=True, capture_output=True, text=True).stdout
    finally:
        path.unlink()


def resources(compiled, tile: Tile) -> dict:
    """regs, stack, n_spills (Triton's, = (stack + local) / 4), STL/LDL counts, smem KB, mma kind of a kernel."""
    cubin = compiled.asm["cubin"]
    regs, stack, _, local = (int(x) for x in RES_USAGE.search(_cuobjdump("-res-usage", cubin=cubin)).groups())
    sass = _cuobjdump("-sass", cubin=cubin)
    mma = "wgmma" if "HGMMA" in sass or "QGMMA" in sass else "mma.sync" if "HMMA" in sass else "none"
    hot, loop = hot_loops(sass)
    return dict(regs=regs, stack=stack, n_spills=(stack + local) // 4, stl=len(re.findall(r"\bSTL\b", sass)),
                ldl=len(re.findall(r"\bLDL\b", sass)), hot=hot, loop=loop,
                per_kscore=round(loop * tile.num_warps * 1024 / (tile.block_m * tile.block_n)),
                smem_kb=round(compiled.metadata.shared / 1024, 1), mma=mma,
                sass_md5=sass_digest(sass))


# Tiles beyond the tables, per (kind, head dim): the restructuring candidates this tool was written to check.
EXTRA: dict[tuple[str, int], list[Tile]] = {
    ("dkdv", 64): [Tile(64, 128, 8, 2), Tile(64, 128, 16, 2), Tile(32, 128, 8, 2), Tile(64, 128, 8, 1),
                   Tile(16, 128, 8, 2)],
    ("dkdv", 128): [Tile(64, 128, 16, 2), Tile(64, 128, 16, 3), Tile(32, 128, 16, 2), Tile(64, 64, 4, 2),
                    Tile(32, 64, 4, 2), Tile(16, 128, 8, 2), Tile(64, 128, 8, 1), Tile(128, 128, 16, 2),
                    Tile(16, 128, 8, 3), Tile(32, 128, 8, 1), Tile(16, 128, 8, 1), Tile(16, 64, 4, 2)],
    ("dkdv", 256): [Tile(32, 64, 4, 2), Tile(32, 64, 8, 2), Tile(64, 64, 16, 2), Tile(32, 128, 16, 2),
                    Tile(16, 64, 4, 2), Tile(32, 64, 16, 2), Tile(16, 64, 8, 2), Tile(32, 64, 8, 1),
                    Tile(16, 64, 8, 1), Tile(16, 32, 4, 2), Tile(64, 64, 8, 2), Tile(64, 32, 8, 1),
                    Tile(32, 32, 4, 2)],
    ("dq", 128): [Tile(64, 64, 4, 3), Tile(128, 64, 16, 2), Tile(128, 128, 16, 2)],
    ("dq", 256): [Tile(64, 64, 4, 2), Tile(64, 32, 8, 2), Tile(128, 32, 8, 2), Tile(64, 64, 8, 2)],
}


def tiles_to_check(kind: str, headdim: int, causal: bool, sets: list[str]) -> list[tuple[Tile, str]]:
    """(tile, where it comes from) for one kernel and head dim: pinned buckets, candidate tables, ALTERNATIVES,
    EXTRA."""
    found: dict[Tile, list[str]] = {}
    if "pinned" in sets:
        for bucket, tile in enumerate(configs.PINNED[kind].get((headdim, causal), ())):
            found.setdefault(tile, []).append(f"pinned{('<=1k', '<=4k', '>4k')[bucket]}")
    if "tables" in sets:
        for name, table in configs.CANDIDATE_TABLES.items():
            for bucket, tile in enumerate(table.get(kind, {}).get((headdim, causal), ())):
                found.setdefault(tile, []).append(f"{name}{('<=1k', '<=4k', '>4k')[bucket]}")
    if "alt" in sets:
        for tile in configs.ALTERNATIVES[kind].get(headdim, ()):
            found.setdefault(tile, []).append("alt")
    if "extra" in sets:
        for tile in EXTRA.get((kind, headdim), []):
            found.setdefault(tile, []).append("extra")
    return [(tile, ",".join(sources)) for tile, sources in found.items()]


def _ptxas_version() -> str:
    """The ptxas this Triton assembles sm_90a with (3.6: `ptxas`, 3.9: `ptxas-blackwell`, despite the name)."""
    from triton.backends.nvidia.compiler import get_ptxas

    tool = get_ptxas(90)
    release = re.search(r"release ([\d.]+)", tool.version)
    return f"ptxas {release.group(1) if release else tool.version} ({Path(tool.path).name})"


def parse_tile(text: str) -> Tile:
    block_m, block_n, num_warps, num_stages = (int(x) for x in text.split("x"))
    return Tile(block_m, block_n, num_warps, num_stages)


def run_one(job: dict) -> dict:
    tile = Tile(*job["tile"])
    try:
        compiled = compile_offline(*record_launch(job["kind"], tile, job["headdim"], job["causal"],
                                                  dtype=DTYPES[job.get("dtype", "bf16")],
                                                  softcap=job.get("softcap", 0.0), sinks=job.get("sinks", False)))
        return dict(job, **resources(compiled, tile))
    except Exception as error:  # one tile failing to compile (too much smem, ptxas error) is a result too
        return dict(job, error=f"{type(error).__name__}: {str(error).splitlines()[0][:120]}")


def _row(r: dict) -> str:
    tile = "x".join(str(x) for x in r["tile"])
    head = f"| {r['kind']} | {r['headdim']} | {'yes' if r['causal'] else 'no'} | {tile} | {r['source']} |"
    if "error" in r:
        return f"{head} {r['error']} ||||||||||"
    cells = (r[key] for key in ("regs", "stack", "n_spills", "stl", "ldl", "hot", "loop", "per_kscore", "smem_kb",
                                 "mma"))
    return f"{head} {' | '.join(str(c) for c in cells)} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=["fwd", "dkdv", "dq"])
    parser.add_argument("--headdims", nargs="+", type=int, choices=[64, 128, 256], default=[64, 128, 256])
    parser.add_argument("--causal", choices=["both", "yes", "no"], default="both")
    parser.add_argument("--sets", nargs="+", choices=["pinned", "tables", "alt", "extra"],
                        default=["pinned", "tables", "alt", "extra"])
    parser.add_argument("--tiles", nargs="+", type=parse_tile, default=None, metavar="MxNxWARPSxSTAGES",
                        help="check these tiles instead of the tables")
    parser.add_argument("-j", "--jobs", type=int, default=1, help="compile in this many processes")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    parser.add_argument("--dtype", choices=list(DTYPES), default="bf16", help="the inputs' dtype (default bf16)")
    parser.add_argument("--softcap", type=float, default=0.0, help="compile the soft-capped kernels (e.g. 30)")
    parser.add_argument("--sinks", action="store_true", help="the forward with attention sinks (fa3nn.sinks)")
    args = parser.parse_args()

    causals = {"both": (False, True), "yes": (True,), "no": (False,)}[args.causal]
    jobs = []
    for kind in args.kinds:
        for headdim in args.headdims:
            for causal in causals:
                tiles = ([(t, "cli") for t in args.tiles] if args.tiles
                         else tiles_to_check(kind, headdim, causal, args.sets))
                jobs += [dict(kind=kind, headdim=headdim, causal=causal, tile=tuple(vars(t).values()), source=src,
                              dtype=args.dtype, softcap=args.softcap, sinks=args.sinks) for t, src in tiles]
    print(f"triton {triton.__version__}, {_ptxas_version()}, target sm_90a, {len(jobs)} kernels", file=sys.stderr)
    if args.jobs > 1:
        with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
            rows = list(pool.map(run_one, jobs))
    else:
        rows = []
        for job in jobs:
            rows.append(run_one(job))
            print(_row(rows[-1]), file=sys.stderr, flush=True)
    if args.json:
        args.json.write_text(json.dumps(dict(triton=triton.__version__, target="sm_90a", rows=rows), indent=1))
    print("| kernel | d | causal | tile MxNxWxS | source | regs | stack B | n_spills | STL | LDL | hot | loop "
          "| w/kscore | smem KB | mma |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(_row(r))


if __name__ == "__main__":
    main()
