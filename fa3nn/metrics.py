"""FLOPs formulas, written once. Benchmarks, the training recipe's MFU and the notes all import these.

Attention forward = two matmuls per attended (query, key) pair: Q·Kᵀ costs 2·d and P·V costs 2·d_v FLOPs, so a
dense call costs 2·b·h·s_q·s_k·(d + d_v) = 4·b·h·s²·d when d = d_v and s_q = s_k (the FlashAttention papers'
count). Causal attends about half the pairs, so it is halved (the papers' convention, exact as s grows). The
backward does five matmuls to the forward's two: 2.5x the forward.
"""

from __future__ import annotations

BACKWARD_FLOPS_RATIO = 2.5


def attention_flops(
    batch: int,
    nheads: int,
    seqlen_q: int,
    seqlen_k: int,
    headdim: int,
    headdim_v: int | None = None,
    causal: bool = False,
    direction: str = "fwd",
) -> float:
    """FLOPs of one attention call; direction is "fwd", "bwd" or "fwd_bwd"."""
    headdim_v = headdim if headdim_v is None else headdim_v
    forward = 2.0 * batch * nheads * seqlen_q * seqlen_k * (headdim + headdim_v)
    if causal:
        forward /= 2
    factors = {"fwd": 1.0, "bwd": BACKWARD_FLOPS_RATIO, "fwd_bwd": 1.0 + BACKWARD_FLOPS_RATIO}
    if direction not in factors:
        raise ValueError(f"direction must be one of {tuple(factors)}, got {direction!r}")
    return forward * factors[direction]
