"""scripts/bench_hopper.py's round orders: every call directly follows every other call equally often, so what one
call leaves behind (clock, power, L2) is charged to every call alike (the rotated order before 2026-12-02 put the
first call after the last one in all rounds but one: 5-8% slower at seqlen 16384, benchmarks/NOTES.md)."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from script_module import load_script


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 7])
def test_balanced_orders_balance_every_predecessor(n):
    orders = load_script("bench_hopper").balanced_orders(n)
    assert len(orders) == (2 * n if n % 2 and n > 1 else n)
    assert all(sorted(order) == list(range(n)) for order in orders)
    follows = Counter((a, b) for order in orders for a, b in zip(order, order[1:]))
    assert set(follows) == {(a, b) for a in range(n) for b in range(n) if a != b}
    assert len(set(follows.values())) <= 1


def _round(tflops, error=False):
    result = {"check": {"ok": True}, "fwd_ms": 1.0 / tflops, "fwd_tflops": tflops}
    return {"error": "RuntimeError: boom"} if error else result


def test_merge_rounds_takes_each_figure_median(monkeypatch):
    """scripts/bench.py --rounds: each backend's figures are medians over the rounds, and a backend that errored in
    any round is reported with that error, not with its good rounds."""
    from script_module import SCRIPTS

    monkeypatch.syspath_prepend(str(SCRIPTS))  # bench.py imports its sibling scripts
    bench = load_script("bench")
    rounds = [{"headdim": 128, "seqlen": 16384, "causal": False,
               "results": {"hopper": _round(t), "flaky": _round(1.0, error=(i == 1))}}
              for i, t in enumerate([700.0, 650.0, 720.0])]
    row = bench.merge_rounds(rounds)
    assert row["seqlen"] == 16384 and len(row["rounds"]) == 3
    assert row["results"]["hopper"]["fwd_tflops"] == 700.0
    assert row["results"]["hopper"]["fwd_ms"] == 1.0 / 700.0
    assert row["results"]["flaky"] == {"error": "RuntimeError: boom"}


@pytest.mark.parametrize("argv, error", [
    (["--seqlens", "2048", "0"], "--seqlens must be >= 1 and <= 16384 .* got 0"),  # divided by zero
    (["--seqlens", "-5"], "--seqlens must be >= 1 .* got -5"),
    (["--seqlens", "32768"], "--seqlens must be >= 1 and <= 16384 .* got 32768"),  # batch 0
    (["--headdims", "0"], "--headdims must be >= 1 and <= 2048 .* got 0"),
    (["--headdims", "4096"], "--headdims must be >= 1 and <= 2048 .* got 4096"),  # nheads 0
    (["--iters", "0"], "--iters must be >= 1, got 0"),
    (["--reps", "-1"], "--reps must be >= 1, got -1"),
    (["--backends", "triton", "tritonn"], "--backends: unknown backend 'tritonn'"),
], ids=lambda x: "")
def test_bench_arguments_are_usage_errors(argv, error, monkeypatch, capsys):
    """scripts/bench.py refuses its arguments before any GPU work, with argparse's usage error (exit status 2)."""
    from script_module import SCRIPTS

    monkeypatch.syspath_prepend(str(SCRIPTS))
    bench = load_script("bench")
    with pytest.raises(SystemExit) as exit_info:
        bench.parse_args(argv)
    assert exit_info.value.code == 2
    assert re.search(error, capsys.readouterr().err)
    args = bench.parse_args(["--seqlens", "16384", "--headdims", "2048", "--backends", "triton-fp8", "cudnn"])
    assert args.seqlens == [16384] and args.headdims == [2048]
