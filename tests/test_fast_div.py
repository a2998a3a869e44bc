"""The persistent scheduler's divisions (kernels/hopper/fast_div.cuh), its walk (kernels/hopper/scheduler.cuh) and the
launchers' causal deals, checked on the CPU: tests/cuda/scheduler_host_check.cu is built with nvcc for the host and
run. It compares FastDiv with plain division (every divisor up to 4096 with every n below 65536, n around multiples
up to 2^31 for ~20k divisors), makes sure a multiplier off by one is caught, and walks every CTA of many scheduler
shapes against the plain-division walk; tests/cuda/causal_deal_host_check.cu checks the deals the launchers pick,
tests/cuda/bwd_schedule_host_check.cu the backward's auto schedule.
Needs nvcc (no GPU); skipped without it. The backward deal script's choices (scripts/model_bwd_gqa_parts.py) are
checked against the same written-out shapes in Python."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from script_module import load_script

from fa3nn.backends import hopper_build

ROOT = Path(__file__).resolve().parents[1]


def _build_and_run(tmp_path, name: str, *flags: str) -> str:
    """tests/cuda/<name>.cu built for the host with nvcc and run; its stdout (asserted to exit 0)."""
    binary = tmp_path / name
    build = subprocess.run([hopper_build.find_nvcc(), "-std=c++17", "-O2", *flags, "-o", str(binary),
                            str(ROOT / "tests" / "cuda" / f"{name}.cu")], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(binary)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


@pytest.mark.skipif(hopper_build.find_nvcc() is None, reason="needs nvcc (CUDA toolkit)")
def test_fast_div_and_scheduler_walk_match_plain_division(tmp_path):
    out = _build_and_run(tmp_path, "scheduler_host_check")
    assert "; 0 failures" in out and "wrong multiplier caught" in out, out


@pytest.mark.skipif(hopper_build.find_nvcc() is None, reason="needs nvcc (CUDA toolkit)")
def test_causal_deals_chosen_by_the_launchers(tmp_path):
    """tests/cuda/causal_deal_host_check.cu: the default deal takes one (batch, head) pair per section up to 8192
    rows at d128 and 4096 at d256, except the FP8 forward at d128 (up to 4096), and one section over every tile
    beyond, as causal_deal 2 always does; boustrophedon throughout. The lengths are written out in the check, not
    read from use_one_pair_sections. Built for sm_90a (the launcher headers carry the kernels' device code), run on
    the host."""
    out = _build_and_run(tmp_path, "causal_deal_host_check", "-I", str(ROOT / "kernels" / "hopper"),
                         hopper_build.GENCODE)
    assert "causal deals checked; 0 failures" in out, out


@pytest.mark.skipif(hopper_build.find_nvcc() is None, reason="needs nvcc (CUDA toolkit)")
def test_backward_auto_schedule(tmp_path):
    """tests/cuda/bwd_schedule_host_check.cu: use_persistent_bwd at written-out shapes (d64's rule, d128's causal
    2048-8192 rows, d256 never since s44b, varlen / windows / MLA never), and auto_persistent_bwd: the launch's ctas,
    varlen of one length (ctas -2) under the dense rule, windows never; tile_order: causal GQA dense outermost per batch
    one CTA per tile, outermost persistent, causal MHA outermost over at most 16 (head, batch) pairs (d64: 48)
    persistent or, with at most 96 key blocks each, one CTA per tile, explicit orders (3: per batch) as given;
    static_deal_gives_way: d128 causal MHA over more than 16 pairs one CTA per tile where the deal model says so
    (s54c's shapes)."""
    out = _build_and_run(tmp_path, "bwd_schedule_host_check", "-I", str(ROOT / "kernels" / "hopper"),
                         hopper_build.GENCODE)
    assert "85 backward schedules checked; 0 failures" in out, out


# (batch, seqlen, heads) of d128 causal MHA -> one CTA per tile under static_deal_gives_way: the host check's
# written-out cases (tests/cuda/bwd_schedule_host_check.cu kDealCases, MHA over more than 16 pairs).
DEAL_SHAPES = [((1, 8192, 24), True), ((1, 8192, 40), True), ((3, 8192, 16), True), ((1, 4096, 48), True),
               ((1, 8192, 28), True), ((2, 8192, 16), False), ((1, 8192, 32), False), ((6, 4096, 16), False),
               ((5, 2048, 16), False), ((8, 2048, 16), False), ((4, 4096, 16), False), ((1, 2048, 64), False),
               ((1, 4096, 32), False)]


@pytest.mark.parametrize(("shape", "per_tile"), DEAL_SHAPES)
def test_backward_deal_script_agrees_with_the_launcher(shape, per_tile):
    """scripts/model_bwd_gqa_parts.py's per_tile / persistent (where the measurements of kernels/hopper/
    bwd_deal_model.cuh were predicted) choose one CTA per tile exactly where the launcher's host model does, so the
    script's numbers in benchmarks/NOTES.md stay the launcher's. No nvcc needed."""
    model = load_script("model_bwd_gqa_parts")
    batch, seqlen, heads = shape
    tiles = model.launch_order(batch, seqlen // 128, heads, outer=False)
    assert (model.per_tile(tiles, 132) > model.persistent(tiles, 132)) == per_tile
