"""scripts/bench_hopper.py's round orders: every call directly follows every other call equally often, so what one
call leaves behind (clock, power, L2) is charged to every call alike (the rotated order before 2026-12-02 put the
first call after the last one in all rounds but one: 5-8% slower at seqlen 16384, benchmarks/NOTES.md)."""

from __future__ import annotations

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
