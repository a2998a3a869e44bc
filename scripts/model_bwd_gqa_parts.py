"""The share of the SMs' time the native backward's tiles keep busy under GQA/MQA, with each K/V head's group of
query heads in 1, 2, 4 or 8 parts (fa3nn.backends.hopper_bwd.kv_parts), at model shapes.

A tile is one (key block, K/V head copy, batch) and walks group / parts query heads over its query blocks (all of
them non-causal, those at or below the key block causal: key block n of nb has nb - n). Tiles go to SMs longest
first, each to the SM that frees up first (list scheduling; one tile per SM at a time), and the share is the work
over SMs x makespan. No per-tile costs (K/V loads, dK / dV stores, launch): it shows where the grid is too small.

    python scripts/model_bwd_gqa_parts.py [--sms 132]
    python scripts/model_bwd_gqa_parts.py --modes   # MHA at few causal tiles, in the kernel's own schedules

--modes models the schedules the kernel has instead of longest-first list scheduling, for causal MHA (or GQA in as
many parts as the group): one CTA per tile in launch order, key blocks innermost (the MHA order) or outermost (every
head's key block 0 first), each tile taken by the SM that frees up first, +1 step per tile for its launch; and
persistent (one CTA per SM, round r of SMs tiles dealt boustrophedon, flash_bwd.cuh BwdCtaTiles), +0.3 step per
chained tile. No L2: the outermost order re-reads Q / dO across heads, which measured 0.73x innermost for causal MHA
at 2k in 2026-11-30's run (benchmarks/results/late-h200-20261130-2350/).
"""

from __future__ import annotations

import argparse
import heapq

# (name, batch, seqlen, K/V heads, group, head dim)
SHAPES = [
    ("Llama-3-8B, one 8k sequence", 1, 8192, 8, 4, 128),
    ("Llama-3-8B, 2 x 4k", 2, 4096, 8, 4, 128),
    ("Llama-3-70B TP8, one 8k sequence", 1, 8192, 1, 8, 128),
    ("Llama-3-70B TP8, 2 x 4k", 2, 4096, 1, 8, 128),
    ("Llama-3-8B TP4, one 8k sequence", 1, 8192, 2, 4, 128),
    ("Qwen2.5-7B 28 / 4, one 8k sequence", 1, 8192, 4, 7, 128),
    ("Qwen2.5-7B TP4 7 / 1, one 8k sequence", 1, 8192, 1, 7, 128),
    ("fa3nn llama-1b recipe, 8 x 4k", 8, 4096, 8, 4, 64),
    ("MQA d256 8 / 1, one 8k sequence", 1, 8192, 1, 8, 256),
    ("Llama-3-8B, one 2k sequence", 1, 2048, 8, 4, 128),
    ("MQA 16 / 1, 2 x 8k (the paper's tokens)", 2, 8192, 1, 16, 128),
]


def busy_share(tiles: list[int], sms: int) -> float:
    finish = [0] * sms
    for t in sorted(tiles, reverse=True):
        heapq.heapreplace(finish, finish[0] + t)
    return sum(tiles) / (sms * max(finish))


def tiles_of(batch: int, seqlen: int, nheads_kv: int, group: int, causal: bool, parts: int, block: int) -> list[int]:
    nb = -(-seqlen // block)
    per_head = [(nb - n if causal else nb) * (group // parts) for n in range(nb)]
    return per_head * (batch * nheads_kv * parts)


# (batch, seqlen, heads, head dim) of causal MHA calls with few tiles, and the paper's 2048-tile shape
FEW_TILE_SHAPES = [(1, 8192, 8, 128), (2, 4096, 8, 128), (1, 2048, 32, 128), (1, 8192, 16, 128), (2, 8192, 16, 128)]


def launch_order(batch: int, nb: int, heads: int, outer: bool) -> list[int]:
    """Causal tiles' steps (key block n of nb: nb - n) in the grid's order: key blocks innermost (n fastest, then
    heads, then batch) or outermost (heads fastest, then batch, then key blocks)."""
    if outer:
        return [nb - n for n in range(nb) for _ in range(batch * heads)]
    return [nb - n for _ in range(batch * heads) for n in range(nb)]


def per_tile(tiles: list[int], sms: int, launch_cost: float = 1.0) -> float:
    finish = [0.0] * sms
    for t in tiles:
        heapq.heapreplace(finish, finish[0] + t + launch_cost)
    return sum(tiles) / (sms * max(finish))


def persistent(tiles: list[int], sms: int, chain_cost: float = 0.3) -> float:
    load = [0.0] * sms
    for r in range(-(-len(tiles) // sms)):
        for cta in range(sms):
            index = r * sms + (sms - 1 - cta if r & 1 else cta)
            if index < len(tiles):
                load[cta] += tiles[index] + chain_cost
    return sum(tiles) / (sms * max(load))


def print_modes(sms: int) -> None:
    print("| causal MHA | tiles | persistent, innermost | persistent, outermost | per tile, innermost | "
          "per tile, outermost |")
    print("|---|---|---|---|---|---|")
    for batch, seqlen, heads, headdim in FEW_TILE_SHAPES:
        nb = -(-seqlen // (64 if headdim == 256 else 128))
        inner, outer = (launch_order(batch, nb, heads, o) for o in (False, True))
        print(f"| {batch} x {seqlen}, {heads} heads, d{headdim} | {len(inner)} | {persistent(inner, sms):.2f} | "
              f"{persistent(outer, sms):.2f} | {per_tile(inner, sms):.2f} | {per_tile(outer, sms):.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sms", type=int, default=132)
    parser.add_argument("--modes", action="store_true", help="the kernel's schedules for causal MHA at few tiles")
    args = parser.parse_args()
    if args.modes:
        print_modes(args.sms)
        return
    print("| shape | non-causal, parts 1 / 2 / 4 / 8 | causal, parts 1 / 2 / 4 / 8 |")
    print("|---|---|---|")
    for name, batch, seqlen, nheads_kv, group, headdim in SHAPES:
        block = 64 if headdim == 256 else 128
        cells = []
        for causal in (False, True):
            cells.append(" / ".join(
                f"{busy_share(tiles_of(batch, seqlen, nheads_kv, group, causal, p, block), args.sms):.2f}"
                if group % p == 0 else "-" for p in (1, 2, 4, 8)))
        print(f"| {name} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
