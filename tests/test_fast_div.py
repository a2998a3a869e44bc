"""The persistent scheduler's divisions (kernels/hopper/fast_div.cuh) and its walk (kernels/hopper/scheduler.cuh),
checked on the CPU: tests/cuda/scheduler_host_check.cu is built with nvcc for the host and run. It compares FastDiv
with plain division (every divisor up to 4096 with every n below 65536, n around multiples up to 2^31 for ~20k
divisors), makes sure a multiplier off by one is caught, and walks every CTA of many scheduler shapes against the
plain-division walk. Needs nvcc (no GPU); skipped without it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fa3nn.backends import hopper_build

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(hopper_build.find_nvcc() is None, reason="needs nvcc (CUDA toolkit)")
def test_fast_div_and_scheduler_walk_match_plain_division(tmp_path):
    binary = tmp_path / "scheduler_host_check"
    build = subprocess.run([hopper_build.find_nvcc(), "-std=c++17", "-O2", "-o", str(binary),
                            str(ROOT / "tests" / "cuda" / "scheduler_host_check.cu")], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(binary)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "; 0 failures" in run.stdout and "wrong multiplier caught" in run.stdout, run.stdout
