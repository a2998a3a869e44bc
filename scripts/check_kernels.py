"""Compile every native Hopper kernel instantiation with nvcc (no GPU needed) and check ptxas' resource report.

Flags in the table: P pingpong, O intra-warpgroup overlap, T cross-tile pipeline, X skip-K/V-loads diagnostic;
q1/q2 = Q stages. Fails (exit 1) when any instantiation spills registers or uses local memory (stack frame), or
when ptxas reports that it serialized wgmma or ignored setmaxnreg (C7508, C7511, C7515, C7519: each means the
kernel is not what the source says). Prints registers, the setmaxnreg split and shared memory per instantiation.

The build is the runtime one (fa3nn.backends.hopper_build): the library and its ptxas log are cached by source
hash, nvcc version and architecture, so a second run with unchanged sources only re-reads the log.

    python scripts/check_kernels.py            # build (or reuse) the cached library, check it
    python scripts/check_kernels.py --fresh    # rebuild into a temporary directory
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fa3nn.backends import hopper_build  # noqa: E402

ENTRY = re.compile(r"Compiling entry function '(\S+)' for '(\w+)'")
PROPS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
USED = re.compile(r"Used (\d+) registers")
CONFIG = re.compile(
    r"FwdConfigILi(\d+)ELi(\d+)ELi(\d+)ELb([01])ELb([01])ELb([01])ELb([01])ELi(\d+)ELb([01])ELi(\d+)ELb([01])E"
)
BAD_WARNINGS = ("C7508", "C7511", "C7515", "C7519")


@dataclass
class Instantiation:
    name: str
    registers: int = -1
    stack: int = -1
    spill_stores: int = -1
    spill_loads: int = -1

    @property
    def config(self) -> dict | None:
        m = CONFIG.search(self.name)
        if m is None:
            return None
        d, bn, stages, bf16, causal, pingpong, overlap, consumers, skip, q_stages, cross = (int(g) for g in m.groups())
        return dict(headdim=d, block_n=bn, stages=stages, dtype="bf16" if bf16 else "fp16", causal=bool(causal),
                    pingpong=bool(pingpong), overlap=bool(overlap), consumers=consumers, skip_kv_loads=bool(skip),
                    q_stages=q_stages, cross_tile=bool(cross and overlap))

    def describe(self) -> str:
        c = self.config
        if c is None:
            return self.name[:60]
        # Shared memory as FwdConfig lays it out: Q stages | K stages | V stages | mbarriers | 1 KB alignment slack.
        smem = c["q_stages"] * 64 * c["consumers"] * c["headdim"] * 2
        smem += 2 * c["stages"] * c["block_n"] * c["headdim"] * 2 + 8 * (2 * c["q_stages"] + 4 * c["stages"]) + 1024
        regs = "24/240" if c["consumers"] == 2 else "32/160"
        flags = "".join(f for f, on in (("P", c["pingpong"]), ("O", c["overlap"]), ("T", c["cross_tile"]),
                                        ("X", c["skip_kv_loads"])) if on)
        return (f"d{c['headdim']:<4}{c['dtype']:<5}{'causal' if c['causal'] else 'full':<7}"
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fresh", action="store_true", help="rebuild in a temporary directory, ignore the cache")
    args = parser.parse_args(argv)
    nvcc = hopper_build.find_nvcc()
    if nvcc is None:
        print("nvcc not found: nothing to check", file=sys.stderr)
        return 2
    if args.fresh:
        library = Path(tempfile.mkdtemp(prefix="fa3nn-check-")) / hopper_build.LIB_NAME
        hopper_build.compile_library(nvcc, hopper_build.kernels_dir(), library)
    else:
        library = hopper_build.build_cached()
    log_path = hopper_build.ptxas_log_path(library)
    if not log_path.is_file():  # a cache entry from before logs were kept: rebuild it
        hopper_build.compile_library(nvcc, hopper_build.kernels_dir(), library)
    kernels, warnings = parse(log_path.read_text())
    failures = [k for k in kernels if k.stack != 0 or k.spill_stores != 0 or k.spill_loads != 0 or k.registers < 0]
    print(f"{len(kernels)} kernel instantiations in {library}")
    for k in sorted(kernels, key=lambda k: k.describe()):
        status = "ok" if k not in failures else f"FAIL stack {k.stack} spill {k.spill_stores}/{k.spill_loads}"
        print(f"  {k.describe():<80} {status}")
    for w in warnings:
        print(f"  ptxas: {w}")
    if not kernels:
        print("no kernels found in the ptxas log")
        return 1
    if failures or warnings:
        print(f"FAILED: {len(failures)} instantiations spill or use local memory, {len(warnings)} ptxas warnings")
        return 1
    print("all instantiations: 0 spills, 0 bytes of stack, no wgmma serialization or setmaxnreg warnings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
