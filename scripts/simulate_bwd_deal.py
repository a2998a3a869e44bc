"""Predict the native backward's causal time per schedule (kernels/hopper/flash_bwd_launch.cuh): one CTA per tile
(the hardware hands each tile, in order, to the SM that frees up first), the persistent static deal (CTA i takes tiles
i, i + G, ...; what the kernel does), a persistent boustrophedon deal (odd rounds reversed; not built) and a
persistent dynamic deal (an atomic tile counter: greedy as the hardware, with the persistent per-tile cost; not
built). Time model, from the twenty-seventh session's measurements (benchmarks/NOTES.md, s27c / s27d, d128, MHA,
64-row steps): a tile of s steps costs s x STEP_US plus a fixed cost, PERSISTENT_US chained (the s27d trace: K/V
wait, first stage, final dQ, epilogue, gap) or PER_TILE_US for one CTA per tile (that plus what the non-causal A/B
puts on a CTA's launch and fill). Only the deal is modelled: no L2 or HBM effects, no tail of the other kernels.

    python scripts/simulate_bwd_deal.py
"""

from __future__ import annotations

import heapq

SMS = 132
TOKENS, WIDTH, HEADDIM, BLOCK_M, BLOCK_N = 16384, 2048, 128, 64, 128
STEP_US = 2.13  # s27d trace, d128, loop per step
PERSISTENT_US = 0.10 + 0.45 + 0.29 + 2.75 + 0.10  # s27d trace: K/V wait, first stage, final dQ, epilogue, gap
PER_TILE_US = PERSISTENT_US + 0.85  # s27d A/B, d128 512 non-causal: 491 -> 478 us over 15.5 tiles per SM


def tile_steps(seqlen: int) -> list[int]:
    """Steps of every tile in the launch's order (key blocks fastest, then heads, then batch), causal."""
    num_m, num_n = seqlen // BLOCK_M, seqlen // BLOCK_N
    per_head = [num_m - n * BLOCK_N // BLOCK_M for n in range(num_n)]  # first_m_block = n * 128 / 64
    return per_head * ((TOKENS // seqlen) * (WIDTH // HEADDIM))


def greedy(costs: list[float]) -> float:
    """Each tile in order to the SM that frees up first; the makespan."""
    free = [0.0] * SMS
    for cost in costs:
        heapq.heappush(free, heapq.heappop(free) + cost)
    return max(free)


def static(costs: list[float], snake: bool) -> float:
    load = [0.0] * SMS
    for t, cost in enumerate(costs):
        rnd, i = divmod(t, SMS)
        load[SMS - 1 - i if snake and rnd % 2 else i] += cost
    return max(load)


def main() -> None:
    print("| seqlen | one CTA per tile us | persistent static | boustrophedon | dynamic | static / per tile | "
          "dynamic / per tile |")
    print("|---|---|---|---|---|---|---|")
    for seqlen in (512, 1024, 2048, 4096, 16384):
        steps = tile_steps(seqlen)
        per_tile = greedy([s * STEP_US + PER_TILE_US for s in steps])
        chained = [s * STEP_US + PERSISTENT_US for s in steps]
        times = (static(chained, False), static(chained, True), greedy(chained))
        print(f"| {seqlen} | {per_tile:.0f} | " + " | ".join(f"{t:.0f}" for t in times)
              + f" | {per_tile / times[0]:.3f} | {per_tile / times[2]:.3f} |")


if __name__ == "__main__":
    main()
