"""Tile shapes per (padded head dim, causal), the autotune space, and its key.

Each table entry is a short list: the first tile is the default (used when autotuning is off, and the one the
GPU tests exercise); the autotuner picks among all of them the first time it meets a key. The key is
(BLOCK_D, MASK_KIND, SEQ_BUCKET, dtypes), with the sequence length bucketed coarsely, so a new sequence length
retunes only when it crosses a bucket boundary. Tiles that would not fit the device's shared memory are dropped
before either path sees them (an A100 has 164 KB per block against Hopper's 227 KB).

Measured choices are recorded in benchmarks/NOTES.md ("Triton backend").
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Tile:
    block_m: int  # query rows per tile
    block_n: int  # key rows per tile
    num_warps: int
    num_stages: int


# Candidate lists come from ptxas register/spill reports (Triton 3.9, sm_90a; benchmarks/NOTES.md) and the GPU
# sweep of `python -m fa3nn.backends.triton.tune`.
# Forward: one program per (BLOCK_M queries, head, batch), walking keys in BLOCK_N steps.
FWD: dict[tuple[int, bool], list[Tile]] = {
    (32, False): [Tile(128, 64, 4, 3), Tile(128, 128, 8, 3)],
    (64, False): [Tile(128, 64, 4, 3), Tile(128, 128, 8, 3)],
    (128, False): [Tile(64, 64, 4, 3), Tile(128, 64, 8, 3), Tile(128, 128, 8, 3)],
    (256, False): [Tile(128, 32, 8, 2), Tile(64, 64, 8, 2)],
}
# dK/dV: one program per (BLOCK_N keys, K/V head, batch), walking queries in BLOCK_M steps. The two fp32
# accumulators (BLOCK_N x dim each) dominate registers: at dim 128 only BLOCK_M = 32 with 8 warps avoids spills,
# yet (64, 128) measured faster on the H200 (244 vs 230 TFLOP/s for the whole backward, seqlen 4096).
BWD_DKDV: dict[tuple[int, bool], list[Tile]] = {
    (32, False): [Tile(32, 128, 8, 3), Tile(64, 128, 8, 3)],
    (64, False): [Tile(32, 128, 8, 3), Tile(64, 128, 8, 3)],
    (128, False): [Tile(64, 128, 8, 2), Tile(32, 128, 8, 2), Tile(32, 128, 8, 3)],
    (256, False): [Tile(64, 32, 8, 2), Tile(32, 64, 8, 2)],
}
# dK/dV with dQ by atomics (the default backward): the dK/dV kernel plus a BLOCK_M x dim dQ product per step.
BWD_FUSED: dict[tuple[int, bool], list[Tile]] = {
    (32, False): [Tile(64, 128, 8, 3), Tile(32, 128, 8, 3)],
    (64, False): [Tile(64, 128, 8, 3), Tile(32, 128, 8, 3)],
    (128, False): [Tile(64, 128, 8, 2), Tile(32, 128, 8, 2), Tile(64, 64, 8, 2)],
    (256, False): [Tile(64, 32, 8, 2), Tile(32, 64, 8, 2)],
}
# dQ: one program per (BLOCK_M queries, head, batch), walking keys in BLOCK_N steps.
BWD_DQ: dict[tuple[int, bool], list[Tile]] = {
    (32, False): [Tile(128, 64, 8, 3), Tile(64, 64, 4, 3)],
    (64, False): [Tile(128, 64, 8, 3), Tile(64, 64, 4, 3)],
    (128, False): [Tile(128, 64, 8, 3), Tile(128, 64, 8, 2), Tile(128, 128, 8, 2)],
    (256, False): [Tile(64, 32, 4, 2), Tile(64, 64, 8, 2)],
}
# Causal starts from the same tiles until measurements say otherwise.
for _table in (FWD, BWD_DKDV, BWD_FUSED, BWD_DQ):
    for (_block_d, _), _tiles in list(_table.items()):
        _table.setdefault((_block_d, True), list(_tiles))

# Under the interpreter: small, unequal tiles, so that small test shapes still cross several blocks of each kind.
INTERPRETER = {"fwd": Tile(32, 16, 4, 1), "dkdv": Tile(16, 32, 4, 1), "fused": Tile(16, 32, 4, 1),
               "dq": Tile(32, 16, 4, 1)}
TABLES = {"fwd": FWD, "dkdv": BWD_DKDV, "fused": BWD_FUSED, "dq": BWD_DQ}


def autotune_enabled() -> bool:
    """FA3NN_TRITON_AUTOTUNE=0 pins the first tile of each entry (reproducible compile set, e.g. for tests)."""
    return os.environ.get("FA3NN_TRITON_AUTOTUNE", "1") != "0"


def seq_bucket(max_seqlen: int) -> int:
    """Autotune key for sequence length: <= 1k, <= 4k, longer."""
    return 0 if max_seqlen <= 1024 else 1 if max_seqlen <= 4096 else 2


def shared_memory_bytes(kind: str, tile: Tile, block_d: int, block_dv: int, elem_bytes: int) -> int:
    """Rough shared-memory need of a tile: the streamed operands times the pipeline depth, plus resident tiles."""
    if kind == "fwd":
        resident, streamed = tile.block_m * block_d, tile.block_n * (block_d + block_dv)
    elif kind in ("dkdv", "fused"):
        resident, streamed = tile.block_n * (block_d + block_dv), tile.block_m * (block_d + block_dv)
    else:
        resident, streamed = tile.block_m * (block_d + block_dv), tile.block_n * (block_d + block_dv)
    return (resident + max(1, tile.num_stages) * streamed) * elem_bytes


def tiles_for(kind: str, block_d: int, causal: bool, block_dv: int, elem_bytes: int, smem_limit: int | None):
    """The candidate tiles of one kernel for one call shape, in preference order, filtered by shared memory."""
    tiles = TABLES[kind][(max(32, block_d), causal)]
    if smem_limit is None:
        return tiles
    fitting = [t for t in tiles if shared_memory_bytes(kind, t, block_d, block_dv, elem_bytes) <= smem_limit]
    if fitting:
        return fitting
    # Nothing fits: halve the smallest tile until it does (stages first, then rows).
    tile = min(tiles, key=lambda t: shared_memory_bytes(kind, t, block_d, block_dv, elem_bytes))
    while shared_memory_bytes(kind, tile, block_d, block_dv, elem_bytes) > smem_limit:
        if tile.num_stages > 1:
            tile = Tile(tile.block_m, tile.block_n, tile.num_warps, tile.num_stages - 1)
        elif tile.block_n > 16:
            tile = Tile(tile.block_m, tile.block_n // 2, tile.num_warps, 1)
        else:
            tile = Tile(max(16, tile.block_m // 2), tile.block_n, tile.num_warps, 1)
    return [tile]
