"""Build, cache and load the native Hopper library (kernels/hopper/ -> libfa3nn_hopper.so).

Where the library comes from, in order:
1. `FA3NN_HOPPER_LIB=/path/to/libfa3nn_hopper.so`: a prebuilt library (clusters whose compute nodes have no nvcc).
   Build one with `python -m fa3nn.backends.hopper_build --out /path/to/libfa3nn_hopper.so` on any machine with
   nvcc >= 12.3 (no GPU needed).
2. The cache: `$FA3NN_CACHE_DIR` (default `~/.cache/fa3nn`) / hopper / <key> / libfa3nn_hopper.so, where the key hashes
   the kernel sources, the nvcc flags, the target architecture and `nvcc --version`. A source edit or a new nvcc gets
   a new key; nothing is rebuilt per import.
3. Built on first use with nvcc. Eight ranks of one job may arrive at once: the build runs under an exclusive file
   lock, writes to a temporary name and renames atomically, and whoever waited on the lock finds the finished file.

`python -m fa3nn.backends.hopper_build` builds (or finds) the cached library and prints its path.
"""

from __future__ import annotations

import argparse
import ctypes
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

ARCH = "sm_90a"
GENCODE = "-gencode=arch=compute_90a,code=sm_90a"
# -fvisibility=hidden: only the C ABI (the *_api.cu files' extern "C" blocks) is exported. With default visibility
# two builds loaded in one process (a benchmark's --compare base=...) shared their template statics through symbol
# interposition: smem_configured<Cfg> set by one build's launch skipped the other's cudaFuncSetAttribute, and that
# build's launches failed with "invalid argument" (H200, 2026-11-30; with this flag the same comparison runs:
# benchmarks/results/visibility-h200-20261130-2345/).
NVCC_FLAGS = (GENCODE, "-O3", "-std=c++17", "-Xcompiler", "-fPIC", "-Xcompiler", "-fvisibility=hidden",
              "-DFA3NN_HANG_GUARD")
LIB_NAME = "libfa3nn_hopper.so"
ENTRY_SOURCE = "flash_fwd_api.cu"
# One translation unit per head dim so the kernels compile in parallel; the C ABI lives in ENTRY_SOURCE (bf16/fp16)
# and flash_fwd_fp8_api.cu (FP8).
# flash_bwd_*.cu: the backward (fa3nn/backends/hopper_bwd.py binds it; dispatch runs it for d64/d128/d256 calls).
UNITS = (ENTRY_SOURCE, "flash_fwd_d64.cu", "flash_fwd_d128.cu", "flash_fwd_d256.cu", "flash_fwd_d192.cu",
         "flash_fwd_fp8_api.cu", "flash_fwd_fp8_d64.cu", "flash_fwd_fp8_d128.cu", "flash_fwd_fp8_d256.cu",
         "flash_bwd_api.cu", "flash_bwd_d64.cu", "flash_bwd_d128.cu", "flash_bwd_d256.cu", "flash_bwd_d192.cu")


def kernels_dir() -> Path:
    """FA3NN_KERNELS_DIR if set; else kernels/hopper/ of this checkout (editable installs); else the copy a wheel
    ships in fa3nn/_kernels/hopper/ (setup.py puts it there)."""
    env = os.environ.get("FA3NN_KERNELS_DIR")
    if env:
        return Path(env)
    package = Path(__file__).resolve().parents[1]
    checkout = package.parent / "kernels" / "hopper"
    return checkout if checkout.is_dir() else package / "_kernels" / "hopper"


def find_nvcc() -> str | None:
    for candidate in (
        os.environ.get("NVCC"),
        shutil.which("nvcc"),
        os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc"),
    ):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


@cache
def nvcc_version(nvcc: str) -> str:
    return subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True).stdout.strip()


def source_files(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.suffix in (".cu", ".cuh"))


def cache_key(root: Path, nvcc: str) -> str:
    digest = hashlib.sha256()
    for path in source_files(root):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    digest.update(" ".join(NVCC_FLAGS).encode())
    digest.update(ARCH.encode())
    digest.update(nvcc_version(nvcc).encode())
    return digest.hexdigest()[:20]


def cache_root() -> Path:
    return Path(os.environ.get("FA3NN_CACHE_DIR", Path.home() / ".cache" / "fa3nn")) / "hopper"


def ptxas_log_path(library: Path) -> Path:
    """Where the build keeps ptxas' resource report (registers, spills, stack) next to the library."""
    return library.with_suffix(".ptxas.log")


def compile_library(nvcc: str, root: Path, out: Path, extra_flags: tuple[str, ...] = ()) -> str:
    """Compile kernels/hopper into `out` atomically (temp dir + rename), keeping ptxas' report beside it.
    The translation units compile in parallel, then nvcc links them (static cudart, no -lcuda needed)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".build-", dir=out.parent) as tmp:
        objects = [os.path.join(tmp, unit.replace(".cu", ".o")) for unit in UNITS]
        commands = [[nvcc, *NVCC_FLAGS, *extra_flags, "-Xptxas", "-v", "-c", "-o", obj, str(root / unit)]
                    for unit, obj in zip(UNITS, objects)]
        with ThreadPoolExecutor(max_workers=min(len(commands), os.cpu_count() or 1)) as pool:
            results = list(pool.map(lambda cmd: subprocess.run(cmd, capture_output=True, text=True), commands))
        for cmd, result in zip(commands, results):
            if result.returncode != 0:
                raise RuntimeError(f"nvcc failed ({' '.join(cmd)}):\n{result.stderr[-4000:]}")
        library = os.path.join(tmp, LIB_NAME)
        link = [nvcc, GENCODE, "-shared", "-o", library, *objects]
        result = subprocess.run(link, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"nvcc link failed ({' '.join(link)}):\n{result.stderr[-4000:]}")
        report = "".join(r.stderr for r in results)
        log = os.path.join(tmp, "ptxas.log")
        Path(log).write_text(report)
        os.replace(log, ptxas_log_path(out))
        os.replace(library, out)
    return report


def build_cached() -> Path:
    """The cached library for these sources and this nvcc, built under a file lock if missing."""
    nvcc = find_nvcc()
    if nvcc is None:
        raise RuntimeError("nvcc not found (set NVCC or CUDA_HOME, or point FA3NN_HOPPER_LIB at a prebuilt library)")
    root = kernels_dir()
    if not (root / ENTRY_SOURCE).is_file():
        raise RuntimeError(f"kernel sources not found at {root} (set FA3NN_KERNELS_DIR or FA3NN_HOPPER_LIB)")
    target = cache_root() / cache_key(root, nvcc) / LIB_NAME
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # other ranks wait here, then find the finished file
        if not target.is_file():
            compile_library(nvcc, root, target)
    return target


def library_path() -> Path:
    prebuilt = os.environ.get("FA3NN_HOPPER_LIB")
    if prebuilt:
        path = Path(prebuilt)
        if not path.is_file():
            raise RuntimeError(f"FA3NN_HOPPER_LIB={prebuilt} does not exist")
        return path
    return build_cached()


# The C ABI these bindings are written for (flash_fwd_api.cu, fa3nn_hopper_abi_version): bumped with every change to
# an exported function's arguments.
ABI_VERSION = 9


def check_abi(lib: ctypes.CDLL, path) -> None:
    """Refuse a library whose C ABI is not ABI_VERSION (one built from another revision: FA3NN_HOPPER_LIB, or a
    benchmark's --compare build), naming what to do."""
    try:
        version_of = lib.fa3nn_hopper_abi_version
    except AttributeError:
        version = None
    else:
        version_of.restype = ctypes.c_int
        version = version_of()
    if version != ABI_VERSION:
        raise RuntimeError(
            f"{path} has C ABI version {version if version is not None else '(none: built before 2026-12-04)'}, this "
            f"fa3nn binds version {ABI_VERSION}: rebuild it from this checkout (python -m fa3nn.backends.hopper_build "
            "--out PATH) or unset FA3NN_HOPPER_LIB")


def load(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    check_abi(lib, path)
    i32, i64p, ptr, f32 = ctypes.c_int, ctypes.POINTER(ctypes.c_int64), ctypes.c_void_p, ctypes.c_float
    lib.fa3nn_hopper_fwd.argtypes = [ptr] * 7 + [i32] * 8 + [i64p, f32] + [i32] * 3 + [f32, ptr] + [i32] * 3 + [ptr] * 2
    lib.fa3nn_hopper_fwd.restype = i32
    lib.fa3nn_hopper_last_error.restype = ctypes.c_char_p
    lib.fa3nn_hopper_fp8_fwd.argtypes = [ptr] * 11 + [i32] * 9 + [i64p, i64p, i32, i32, f32] + [i32] * 4 + [ptr] * 2
    lib.fa3nn_hopper_fp8_fwd.restype = i32
    lib.fa3nn_hopper_bwd.argtypes = [ptr] * 15 + [i32] * 9 + [i64p, f32] + [i32] * 3 + [f32] + [i32] * 5 + [ptr]
    lib.fa3nn_hopper_bwd.restype = i32
    lib.fa3nn_hopper_bwd_block_m.restype = i32
    return lib


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the native Hopper library (needs nvcc, not a GPU).")
    parser.add_argument("--out", type=Path, help="write the library here instead of the cache")
    parser.add_argument("--define", action="append", default=[], metavar="NAME",
                        help="compile with -DNAME (measurement builds, e.g. FA3NN_BWD_TRACE; needs --out)")
    args = parser.parse_args(argv)
    if args.define and args.out is None:
        parser.error("--define builds a measurement library: give it --out (the cache holds the default build only)")
    if args.out is not None:
        nvcc = find_nvcc()
        if nvcc is None:
            print("nvcc not found", file=sys.stderr)
            return 1
        compile_library(nvcc, kernels_dir(), args.out.resolve(), tuple(f"-D{name}" for name in args.define))
        print(args.out.resolve())
    else:
        print(build_cached())
    return 0


if __name__ == "__main__":
    sys.exit(main())
