"""Compile every native Hopper kernel instantiation with nvcc (no GPU needed) and check ptxas' resource report.

Flags in the table: P pingpong, O intra-warpgroup overlap, T cross-tile pipeline, X skip-K/V-loads diagnostic,
E4 every 4th exp2 on the FP32 pipe (FP8); FP8 also S serial steps with P V promoted per block and Xn its experiment n
(flash_fwd_fp8.cuh, Fp8Experiment: X7 the fused-turn schedule, the others timing-only); q1/q2 = Q stages; bwd rows
are the backward's main kernel (64 query rows x 128 keys per step; "ovl S" / "ovl S+dP": the overlap variants,
flash_bwd_overlap.cuh; its pre/post-processing kernels are plain elementwise passes, listed without SASS
requirements).
Fails (exit 1) when any instantiation spills registers
or uses local memory (stack frame), or when ptxas reports that it serialized wgmma or ignored setmaxnreg (C7508,
C7511, C7512, C7515, C7519: each means the kernel is not what the source says). Prints registers, the setmaxnreg split
and shared memory per instantiation.

With cuobjdump available (PATH, $CUDA_HOME/bin, or $CUOBJDUMP; pip's nvidia-cuda-cuobjdump + nvidia-cuda-nvdisasm
provide it), also reads the SASS: every bf16/fp16 kernel must issue HGMMA and every FP8 kernel QGMMA (the e4m3
tensor-core instruction; an FP8 kernel whose GEMMs fell back to anything else fails), and every kernel UTMALDG
(TMA loads); every backward main kernel also UBLKCP (the bulk copies of lse/delta), and for its dQ either REDG (the
per-thread reductions, the default) or, in the bulk-dQ variant, UTMAREDG (TMA reduce-add) and no REDG at all.
Without cuobjdump the SASS columns say "not checked".

The build is the runtime one (fa3nn.backends.hopper_build): the library and its ptxas log are cached by source
hash, nvcc version and architecture, so a second run with unchanged sources only re-reads the log.

    python scripts/check_kernels.py            # build (or reuse) the cached library, check it
    python scripts/check_kernels.py --fresh    # rebuild into a temporary directory
    python scripts/check_kernels.py --library build/libfa3nn_hopper.so   # a library built with hopper_build --out
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fa3nn.backends import hopper_build  # noqa: E402

ENTRY = re.compile(r"Compiling entry function '(\S+)' for '(\w+)'")
PROPS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
USED = re.compile(r"Used (\d+) registers")
# FwdConfig<d, block n, stages, bf16, causal, pingpong, overlap, consumers, skip loads, q stages, cross tile, int max,
# local, softcap, d_v> (every argument spelled out: the launchers pass them all).
CONFIG = re.compile(
    r"FwdConfigILi(\d+)ELi(\d+)ELi(\d+)ELb([01])ELb([01])ELb([01])ELb([01])ELi(\d+)ELb([01])ELi(\d+)ELb([01])E"
    r"(?:Lb[01]ELb[01]ELb[01]ELi(\d+)E)?"
)
# Fp8FwdConfig<d, stages, q stages, bf16 out, causal, pingpong, poly every[, experiment, key block[, promote[,
# consumers]]]>. Itanium mangling writes a negative int argument as n<digits> (poly every -2: Lin2E).
FP8_CONFIG = re.compile(
    r"Fp8FwdConfigILi(\d+)ELi(\d+)ELi(\d+)ELb([01])ELb([01])ELb([01])ELi(n?\d+)E"
    r"(?:Li(n?\d+)ELi(\d+)E(?:Lb([01])E(?:Li(\d+)E)?)?)?"
)
# BwdConfig<d, stages, bf16, causal, bulk dQ, overlap[, block m[, varlen[, local[, softcap[, d_v[, mla key
# split]]]]]]>
BWD_CONFIG = re.compile(r"BwdConfigILi(\d+)ELi(\d+)ELb([01])ELb([01])ELb([01])ELb([01])E"
                        r"(?:Li(\d+)E(?:Lb([01])E(?:Lb([01])E(?:Lb([01])E(?:Li(\d+)E(?:Lb([01])E)?)?)?)?)?)?")


def mangled_int(group: str) -> int:
    return -int(group[1:]) if group.startswith("n") else int(group)
# C7512 (nvcc 13.0): "wgmma.mma_async instructions are serialized due to insufficient register resources" -- seen on
# the backward's first build, together with 516 B of spills.
BAD_WARNINGS = ("C7508", "C7511", "C7512", "C7515", "C7519")
SASS_FUNCTION = re.compile(r"Function : (\S+)")
SASS_OPS = ("HGMMA", "QGMMA", "UTMALDG", "UBLKCP", "REDG", "UTMAREDG", "UBLKRED")
# Whole mnemonics: a substring test would count every UTMAREDG (TMA reduce) as a REDG too.
SASS_OP_PATTERNS = {op: re.compile(rf"\b{op}\b") for op in SASS_OPS}


@dataclass
class Instantiation:
    name: str
    registers: int = -1
    stack: int = -1
    spill_stores: int = -1
    spill_loads: int = -1
    sass: dict | None = None  # instruction counts (SASS_OPS) from cuobjdump, None when not read

    @property
    def fp8(self) -> bool:
        return FP8_CONFIG.search(self.name) is not None

    @property
    def bwd(self) -> bool:
        return BWD_CONFIG.search(self.name) is not None

    @property
    def bwd_dq_bulk(self) -> bool:
        m = BWD_CONFIG.search(self.name)
        return m is not None and m.group(5) == "1"

    @property
    def elementwise(self) -> bool:
        """The backward's pre/post-processing kernels: no tensor cores or TMA expected."""
        return "flash_bwd_preprocess" in self.name or "flash_bwd_postprocess" in self.name  # (also the _vec_ ones)

    @property
    def sass_failure(self) -> str | None:
        if self.sass is None or self.elementwise:
            return None
        gemm = "QGMMA" if self.fp8 else "HGMMA"
        if not self.bwd:
            required = (gemm, "UTMALDG")
        else:
            required = (gemm, "UTMALDG", "UBLKCP", "UTMAREDG" if self.bwd_dq_bulk else "REDG")
        missing = [op for op in required if self.sass.get(op, 0) == 0]
        if missing:
            return f"no {' / '.join(missing)} in SASS"
        if self.bwd_dq_bulk and self.sass.get("REDG", 0):
            return f"bulk dQ variant still has {self.sass['REDG']} REDG"
        return None

    def sass_summary(self) -> str:
        if self.sass is None:
            return "SASS not checked"
        return " ".join(f"{op} {self.sass.get(op, 0)}" for op in SASS_OPS if self.sass.get(op, 0))

    def describe_fp8(self) -> str:
        m = FP8_CONFIG.search(self.name)
        d, stages, q_stages, out_bf16, causal, pingpong, poly_every = (mangled_int(g) for g in m.groups()[:7])
        experiment, block_n, promote, consumers = (mangled_int(g) if g is not None else default
                                                    for g, default in zip(m.groups()[7:], (0, 128, 0, 2)))
        block_m = 64 * consumers
        # Shared memory as Fp8FwdConfig lays it out: Q stages | K stages | Vt stages (block_n keys x d bytes each) |
        # mbarriers | 1 KB alignment slack.
        smem = q_stages * block_m * d + 2 * stages * block_n * d + 8 * (2 * q_stages + 4 * stages) + 1024
        # P pingpong, O intra-warpgroup overlap, S serial steps with P V promoted per block (kPromote), E poly exp2
        # every n, X experiment.
        flags = ("P" if pingpong else "") + ("S" if promote else "O") + (f"E{poly_every}" if poly_every else "") + (
            f"X{experiment}" if experiment else "")
        tile = f"{block_m}x{block_n}"
        split = "24/240" if consumers == 2 else "32/160"  # Fp8FwdConfig::kProducerRegs / kConsumerRegs
        return (f"d{d:<4}fp8>{'bf16' if out_bf16 else 'fp16':<5}{'causal' if causal else 'full':<7}{tile:<9}st{stages} "
                f"q{q_stages} {flags:<5}regs {self.registers} (setmaxnreg {split})  smem {smem / 1024:.1f} KB")

    @property
    def config(self) -> dict | None:
        m = CONFIG.search(self.name)
        if m is None:
            return None
        d, bn, stages, bf16, causal, pingpong, overlap, consumers, skip, q_stages, cross = (
            int(g) for g in m.groups()[:11])
        return dict(headdim=d, headdim_v=int(m.group(12) or d), block_n=bn, stages=stages,
                    dtype="bf16" if bf16 else "fp16", causal=bool(causal),
                    pingpong=bool(pingpong), overlap=bool(overlap), consumers=consumers, skip_kv_loads=bool(skip),
                    q_stages=q_stages, cross_tile=bool(cross and overlap))

    def describe_bwd(self) -> str:
        groups = BWD_CONFIG.search(self.name).groups()
        d, stages, bf16, causal, dq_bulk, overlap = (int(g) for g in groups[:6])
        block_m, varlen, local, softcap, dv, mla_keys = (int(g) if g is not None else default
                                                         for g, default in zip(groups[6:], (64, 0, 0, 0, d, 0)))
        # Shared memory as BwdConfig lays it out: K | V (block_n keys x d each) | Q, dO stages (block_m rows x d
        # each) | dS^T x 2 (block_n x block_m) | d256: P^T x 2 | bulk dQ: 32 KB fp32 per buffer, two buffers (one
        # with 128-row blocks; d256: none, it stages in the ring) | lse/delta stages (block_m floats each) |
        # mbarriers | 1 KB alignment slack. d256 (kColSplit): 64-key blocks. d192 / dv 128 (kPanelSplit): V and dO
        # dv wide, 64-key blocks with P^T, one bulk dQ buffer of 64 x 192 fp32; with the MLA key split (mla_keys)
        # 128-key blocks and one dS^T buffer.
        col_split = d == 256 or (dv != d and not mla_keys)
        block_n = 64 if col_split else 128
        ds_buffers = 4 if col_split else 1 if mla_keys else 2
        smem = block_n * (d + dv) * 2 + stages * block_m * (d + dv) * 2 + ds_buffers * block_n * block_m * 2
        smem += 2 * stages * block_m * 4 + 8 * (2 + 2 * stages) + 1024
        if dq_bulk and d != 256:
            smem += block_m * d * 4 if dv != d else (1 if block_m == 128 else 2) * 32768
        split = ("rows" if block_m == 128 else "keys" if d < 128 or mla_keys else "panels" if dv != d
                 else "cols")
        # V varlen, L sliding window, C softcap
        flags = "".join(f for f, on in (("V", varlen), ("L", local), ("C", softcap)) if on)
        dims = f"{d}" if dv == d else f"{d}/{dv} "
        return (f"bwd d{dims:<4}{'bf16' if bf16 else 'fp16':<5}{'causal' if causal else 'full':<7}"
                f"{block_m}x{block_n:<4} "
                f"st{stages} dQ {'bulk' if dq_bulk else 'red'} by {split} "
                f"{('ovl S+dP ' if d < 128 else 'ovl S    ') if overlap else ''}{flags:<4}regs {self.registers} "
                f"(setmaxnreg {'32/232' if local else '24/240'})  smem {smem / 1024:.1f} KB")

    def describe(self) -> str:
        if self.fp8:
            return self.describe_fp8()
        if self.bwd:
            return self.describe_bwd()
        c = self.config
        if c is None:
            return self.name[:60]
        # Shared memory as FwdConfig lays it out: Q stages | K stages | V stages | mbarriers | 1 KB alignment slack.
        smem = c["q_stages"] * 64 * c["consumers"] * c["headdim"] * 2
        smem += c["stages"] * c["block_n"] * (c["headdim"] + c["headdim_v"]) * 2
        smem += 8 * (2 * c["q_stages"] + 4 * c["stages"]) + 1024
        regs = "24/240" if c["consumers"] == 2 else "32/160"
        flags = "".join(f for f, on in (("P", c["pingpong"]), ("O", c["overlap"]), ("T", c["cross_tile"]),
                                        ("X", c["skip_kv_loads"])) if on)
        dims = f"{c['headdim']}" if c["headdim_v"] == c["headdim"] else f"{c['headdim']}/{c['headdim_v']} "
        return (f"d{dims:<4}{c['dtype']:<5}{'causal' if c['causal'] else 'full':<7}"
                f"{64 * c['consumers']}x{c['block_n']:<5}st{c['stages']} q{c['q_stages']} {flags:<5}"
                f"regs {self.registers} "
                f"(setmaxnreg {regs})  smem {smem / 1024:.1f} KB")


def parse(log: str) -> tuple[list[Instantiation], list[str]]:
    kernels: list[Instantiation] = []
    warnings = [line.strip() for line in log.splitlines() if any(code in line for code in BAD_WARNINGS)]
    for line in log.splitlines():
        if m := ENTRY.search(line):
            kernels.append(Instantiation(m.group(1)))
        elif kernels and (m := PROPS.search(line)):
            kernels[-1].stack, kernels[-1].spill_stores, kernels[-1].spill_loads = (int(g) for g in m.groups())
        elif kernels and (m := USED.search(line)):
            kernels[-1].registers = int(m.group(1))
    return kernels, warnings


def find_cuobjdump() -> str | None:
    for candidate in (os.environ.get("CUOBJDUMP"), shutil.which("cuobjdump"),
                      os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "cuobjdump")):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def sass_counts(cuobjdump: str, library: Path) -> dict[str, dict[str, int]] | None:
    """{mangled kernel name: {op: count}} from `cuobjdump -sass`, or None if it cannot disassemble."""
    result = subprocess.run([cuobjdump, "-sass", str(library)], capture_output=True, text=True)
    if result.returncode != 0:
        print(f"cuobjdump failed (SASS not checked): {result.stderr.strip()[:300]}")
        return None
    counts: dict[str, dict[str, int]] = {}
    current = None
    for line in result.stdout.splitlines():
        if m := SASS_FUNCTION.search(line):
            current = counts.setdefault(m.group(1), {})
        elif current is not None:
            for op, pattern in SASS_OP_PATTERNS.items():
                if pattern.search(line):
                    current[op] = current.get(op, 0) + 1
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fresh", action="store_true", help="rebuild in a temporary directory, ignore the cache")
    parser.add_argument("--library", type=Path, help="check this build (hopper_build --out) and its .ptxas.log instead")
    args = parser.parse_args(argv)
    nvcc = hopper_build.find_nvcc()
    if nvcc is None:
        print("nvcc not found: nothing to check", file=sys.stderr)
        return 2
    if args.library is not None:
        library = args.library.resolve()
    elif args.fresh:
        library = Path(tempfile.mkdtemp(prefix="fa3nn-check-")) / hopper_build.LIB_NAME
        hopper_build.compile_library(nvcc, hopper_build.kernels_dir(), library)
    else:
        library = hopper_build.build_cached()
    log_path = hopper_build.ptxas_log_path(library)
    if not log_path.is_file():  # a cache entry from before logs were kept: rebuild it
        hopper_build.compile_library(nvcc, hopper_build.kernels_dir(), library)
    kernels, warnings = parse(log_path.read_text())
    cuobjdump = find_cuobjdump()
    sass = sass_counts(cuobjdump, library) if cuobjdump else None
    if sass is not None:
        for k in kernels:
            k.sass = sass.get(k.name, {})
    failures = [k for k in kernels if k.stack != 0 or k.spill_stores != 0 or k.spill_loads != 0 or k.registers < 0
                or k.sass_failure]
    print(f"{len(kernels)} kernel instantiations in {library}")
    for k in sorted(kernels, key=lambda k: k.describe()):
        spills = f"FAIL stack {k.stack} spill {k.spill_stores}/{k.spill_loads}"
        status = "ok" if k not in failures else k.sass_failure or spills
        print(f"  {k.describe():<80} {k.sass_summary():<32} {status}")
    for w in warnings:
        print(f"  ptxas: {w}")
    if not kernels:
        print("no kernels found in the ptxas log")
        return 1
    if failures or warnings:
        print(f"FAILED: {len(failures)} instantiations spill, use local memory or miss their tensor-core / TMA "
              f"instructions; {len(warnings)} ptxas warnings")
        return 1
    sass_note = ("HGMMA/QGMMA and UTMALDG in every kernel's SASS (UBLKCP and REDG too in the backward's; UTMAREDG "
                 "and no REDG in its bulk-dQ variant)"
                 if sass is not None else "SASS not checked")
    print(f"all instantiations: 0 spills, 0 bytes of stack, no wgmma serialization or setmaxnreg warnings; {sass_note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
