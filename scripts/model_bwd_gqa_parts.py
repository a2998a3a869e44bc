"""The share of the SMs' time the native backward's tiles keep busy under GQA/MQA, with each K/V head's group of
query heads in 1, 2, 4 or 8 parts (branch wip/gqa-parts-kernel: hopper_bwd.kv_parts), at model shapes.

A tile is one (key block, K/V head copy, batch) and walks group / parts query heads over its query blocks (all of
them non-causal, those at or below the key block causal: key block n of nb has nb - n). Tiles go to SMs longest
first, each to the SM that frees up first (list scheduling; one tile per SM at a time), and the share is the work
over SMs x makespan. No per-tile costs (K/V loads, dK / dV stores, launch): it shows where the grid is too small.

    python scripts/model_bwd_gqa_parts.py [--sms 132]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sms", type=int, default=132)
    args = parser.parse_args()
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
