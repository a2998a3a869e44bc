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
