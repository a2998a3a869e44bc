"""Shared pytest setup: the `gpu` marker skips without CUDA, so the same suite runs on a CPU machine and the H200."""

import zlib

import pytest
import torch


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run `pytest -m gpu` on the H200)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _seed(request):
    """A fresh, reproducible seed per test (derived from its id), so inputs differ between tests but not runs."""
    torch.manual_seed(zlib.crc32(request.node.nodeid.encode()))
