"""A wheel built from this checkout ships the native kernel sources (fa3nn/_kernels/hopper/) and no `kernels`
package, so a non-editable install can build the Hopper backend on first use."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_wheel_ships_kernel_sources_not_a_kernels_package(tmp_path):
    pytest.importorskip("setuptools")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path), str(REPO)],
        capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (wheel,) = tmp_path.glob("fa3nn-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    sources = sorted(p.name for p in (REPO / "kernels" / "hopper").iterdir() if p.suffix in (".cu", ".cuh"))
    shipped = sorted(Path(n).name for n in names if n.startswith("fa3nn/_kernels/hopper/"))
    assert sources and shipped == sources
    assert not any(n.startswith("kernels/") for n in names)
    assert "fa3nn/backends/reference.py" in names
