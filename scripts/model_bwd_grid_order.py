"""A scheduling model of the Hopper backward's grid order (kernels/hopper/flash_bwd_launch.cuh, bwd_tile): how close
to ideal the CTAs of one main-kernel launch finish on 132 SMs, for the two CTA orders, MHA vs GQA/MQA. CPU only.

The main kernel runs one CTA per SM (384 threads at 168 registers fill the register file, every variant) and the
hardware hands CTAs to free SMs in grid order (x fastest). A CTA of key block n walks group *
(num_m_blocks - first_m_block(n)) query-block steps; under a causal mask with seqlen_q == seqlen_k that is group *
(seqlen / 64 - 2n), so key block 0 is the longest, and group times longer under GQA than under MHA. Modeled: each
step takes one time unit, each CTA a fixed OVERHEAD more (K/V load, dK/dV store), CTAs go to the earliest free SM in
order (greedy list scheduling). Efficiency = (sum of CTA times / 132) / makespan.

Orders: inner = grid (key blocks, K/V heads, batch), the MHA order; outer = (K/V heads, batch, key blocks), which
dispatches key block 0 of every (K/V head, batch) first (longest first). Not modeled: memory traffic (outer order
runs fewer CTAs of one head at a time, so less L2 reuse of Q/dO), the per-step cost's dependence on masking.

    python scripts/model_bwd_grid_order.py
"""

from __future__ import annotations

import heapq
import sys

SMS = 132
OVERHEAD = 4  # steps' worth of time per CTA outside the m loop (a guess; the ranking does not depend on it)
TOKENS, NHEADS = 16384, 16  # the device check's shapes (scripts/hopper_bwd_gqa_check.py)


def cta_steps(seqlen: int, batch: int, nheads_kv: int, causal: bool, order: str) -> list[int]:
    group, n_blocks, m_blocks = NHEADS // nheads_kv, seqlen // 128, seqlen // 64

    def steps(n):
        return group * (m_blocks - (2 * n if causal else 0)) + OVERHEAD

    if order == "inner":
        return [steps(n) for _ in range(batch) for _ in range(nheads_kv) for n in range(n_blocks)]
    return [steps(n) for n in range(n_blocks) for _ in range(batch) for _ in range(nheads_kv)]


def efficiency(works: list[int]) -> float:
    free = [0] * SMS
    makespan = 0
    for work in works:
        start = heapq.heappop(free)
        makespan = max(makespan, start + work)
        heapq.heappush(free, start + work)
    return sum(works) / SMS / makespan


def main() -> int:
    print("| seqlen | causal | q/kv heads | inner | outer |")
    print("|---|---|---|---|---|")
    for seqlen in (2048, 8192):
        batch = TOKENS // seqlen
        for causal in (False, True):
            for nheads_kv in (16, 4, 2, 1):
                inner, outer = (efficiency(cta_steps(seqlen, batch, nheads_kv, causal, o)) for o in ("inner", "outer"))
                print(f"| {seqlen} | {'yes' if causal else 'no'} | {NHEADS}/{nheads_kv} | {inner:.3f} | {outer:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
