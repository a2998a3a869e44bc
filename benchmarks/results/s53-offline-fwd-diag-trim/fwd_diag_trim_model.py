"""s53's GEMM-work model for trimming the native forward's masked key blocks per consumer warpgroup (benchmarks/NOTES.md
"s53 offline"): causal, seqlen_q = seqlen_k, the default tiles (head dim: consumers, kBlockN); each warpgroup's work
per visited key block is kBlockN columns untrimmed, its attended columns rounded up to 16 trimmed. Prints the trimmed
share of the untrimmed work, all masked blocks and the first visited block only."""

import math

TILES = {64: (3, 128), 128: (2, 176), 256: (2, 80)}  # head dim: (consumer warpgroups, kBlockN)


def shares(consumers: int, block_n: int, seqlen: int) -> tuple[float, float]:
    block_m = 64 * consumers
    full = trimmed = first_only = 0
    for m in range(math.ceil(seqlen / block_m)):
        blocks = math.ceil(min(seqlen, (m + 1) * block_m) / block_n)
        for wg in range(consumers):
            first_row = m * block_m + wg * 64
            if first_row >= seqlen:
                continue
            end_row = min(seqlen, first_row + 64)
            for n in range(blocks):
                cols = 16 * math.ceil(max(0, min(block_n, end_row - n * block_n)) / 16)
                full += block_n
                trimmed += cols
                first_only += cols if n == blocks - 1 else block_n
    return trimmed / full, first_only / full


for headdim, (consumers, block_n) in TILES.items():
    for seqlen in (512, 1024, 2048, 8192):
        every, first = shares(consumers, block_n, seqlen)
        print(f"d{headdim} {seqlen}: all masked blocks {every:.3f}, first block only {first:.3f}")
