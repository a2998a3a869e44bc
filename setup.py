"""Packaging hook: ship kernels/ (CUDA sources; deliberately not a Python package, see pyproject.toml) inside the
wheel as fa3nn/_kernels/, so a non-editable install can still build the native Hopper backend on first use.
Everything else is in pyproject.toml."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

KERNEL_SUFFIXES = (".cu", ".cuh", ".h")


class BuildPyWithKernels(build_py):
    def run(self):
        super().run()
        source = Path(__file__).resolve().parent / "kernels"
        target = Path(self.build_lib) / "fa3nn" / "_kernels"
        for path in source.rglob("*"):
            if path.suffix in KERNEL_SUFFIXES:
                destination = target / path.relative_to(source)
                destination.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, destination)


setup(cmdclass={"build_py": BuildPyWithKernels})
