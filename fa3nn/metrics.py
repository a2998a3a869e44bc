"""FLOPs formulas, written once. Benchmarks, the training recipe's MFU and the notes all import these.

Attention forward = two matmuls per attended (query, key) pair: Q·Kᵀ costs 2·d and P·V costs 2·d_v FLOPs, so a
dense call costs 2·b·h·s_q·s_k·(d + d_v) = 4·b·h·s²·d when d = d_v and s_q = s_k (the FlashAttention papers'
count). Causal attends about half the pairs, so it is halved (the papers' convention, exact as s grows). A sliding
window counts the pairs it attends exactly (attended_pairs). The backward does five matmuls to the forward's two:
2.5x the forward.
"""

from __future__ import annotations

BACKWARD_FLOPS_RATIO = 2.5


def _pairs_at_or_below(seqlen_q: int, seqlen_k: int, t: int) -> int:
    """Pairs (i, j), 0 <= i < seqlen_q, 0 <= j < seqlen_k, with j <= i + t: row i counts clamp(i + t + 1, 0,
    seqlen_k) keys, summed in closed form as H(t + 1 + seqlen_q) - H(t + 1), H(x) = sum of clamp(y, 0, seqlen_k)
    over the integers y < x."""

    def h(x: int) -> int:
        if x <= 0:
            return 0
        if x <= seqlen_k + 1:
            return x * (x - 1) // 2
        return seqlen_k * (seqlen_k + 1) // 2 + (x - seqlen_k - 1) * seqlen_k

    return h(t + 1 + seqlen_q) - h(t + 1)


def attended_pairs(seqlen_q: int, seqlen_k: int, left: int, right: int) -> int:
    """(query, key) pairs a window (left, right) attends, -1 unbounded, bottom-right aligned (fa3nn/masks.py): query
    row i sees keys max(0, i + off - left) .. min(seqlen_k - 1, i + off + right), off = seqlen_k - seqlen_q. In
    closed form (O(1) at any length): the pairs with j <= i + off + right less those with j <= i + off - left - 1."""
    off = seqlen_k - seqlen_q
    upper = seqlen_q * seqlen_k if right < 0 else _pairs_at_or_below(seqlen_q, seqlen_k, off + right)
    lower = 0 if left < 0 else _pairs_at_or_below(seqlen_q, seqlen_k, off - left - 1)
    return max(0, upper - lower)


def attention_flops(
    batch: int,
    nheads: int,
    seqlen_q: int,
    seqlen_k: int,
    headdim: int,
    headdim_v: int | None = None,
    causal: bool = False,
    direction: str = "fwd",
    window: tuple[int, int] | None = None,
) -> float:
    """FLOPs of one attention call; direction is "fwd", "bwd" or "fwd_bwd". `window` (left, right), a sliding
    window other than causal, counts its attended pairs exactly instead (causal then only bounds it on the right)."""
    headdim_v = headdim if headdim_v is None else headdim_v
    if window is not None:
        left, right = window[0], 0 if causal else window[1]
        pairs = attended_pairs(seqlen_q, seqlen_k, left, right)
        forward = 2.0 * batch * nheads * pairs * (headdim + headdim_v)
    else:
        forward = 2.0 * batch * nheads * seqlen_q * seqlen_k * (headdim + headdim_v)
    if causal and window is None:
        forward /= 2
    factors = {"fwd": 1.0, "bwd": BACKWARD_FLOPS_RATIO, "fwd_bwd": 1.0 + BACKWARD_FLOPS_RATIO}
    if direction not in factors:
        raise ValueError(f"direction must be one of {tuple(factors)}, got {direction!r}")
    return forward * factors[direction]


# --------------------------------------------------------------------------------------------------------------------
# Training: model FLOPs per token, GPU peaks, MFU
# --------------------------------------------------------------------------------------------------------------------


def model_flops_per_token(
    n_params: int, n_layers: int, n_heads: int, head_dim: int, seqlen: int, causal: bool = True
) -> float:
    """Training (forward + backward) model FLOPs per token of a decoder-only transformer.

    6·N: every parameter of a matmul costs 2 FLOPs per token in the forward (multiply + add) and 4 in the backward
    (the input gradient and the weight gradient); N leaves out the input embedding table (a lookup, not a matmul).
    Attention: the two score matmuls per layer, `attention_flops` forward for one query row against `seqlen` keys,
    times 3 for forward + backward (backward = 2 x forward, as for 6·N: model FLOPs count the math the model needs,
    not the recomputation a FlashAttention backward does). causal=True halves the attention term (each query sees
    half the keys on average); PaLM and torchtitan do not halve, so at equal speed their MFU reads higher by the
    attention share.
    """
    attention_forward_per_token = attention_flops(1, n_heads, 1, seqlen, head_dim, causal=False)
    if causal:
        attention_forward_per_token /= 2
    return 6.0 * n_params + 3.0 * n_layers * attention_forward_per_token


# Dense (no 2:4 sparsity) peak tensor-core TFLOP/s per GPU, from NVIDIA's datasheets, whose headline numbers are
# "with sparsity" and twice these. H100 SXM5 and H200 (same GH100 chip, same clocks): 989.4 bf16 / 1978.9 fp8;
# H100 PCIe: 756 / 1513; H100 NVL and H200 NVL (the same 1,671 / 3,341 sparse): 835 / 1671; H800 SXM5 and PCIe
# (H100's compute, slower links): as H100 SXM5 and PCIe; A100 (SXM and PCIe): 312 bf16, no fp8.
# Keys are matched against torch.cuda.get_device_name() (e.g. "NVIDIA H200", "NVIDIA H100 80GB HBM3"), first match,
# so a board's own row comes before the row whose name is a part of its name ("H200 NVL" before "H200").
PEAK_TFLOPS: dict[str, dict[str, float]] = {
    "H100 PCIe": {"bf16": 756.0, "fp8": 1513.0},
    "H100 NVL": {"bf16": 835.0, "fp8": 1671.0},
    "H200 NVL": {"bf16": 835.0, "fp8": 1671.0},
    "H800 PCIe": {"bf16": 756.0, "fp8": 1513.0},
    "H800": {"bf16": 989.4, "fp8": 1978.9},
    "H100": {"bf16": 989.4, "fp8": 1978.9},
    "H200": {"bf16": 989.4, "fp8": 1978.9},
    "GH200": {"bf16": 989.4, "fp8": 1978.9},
    "A100": {"bf16": 312.0},
}


def peak_tflops(device_name: str | None, precision: str = "bf16") -> float | None:
    """The table's dense peak for a device name, or None when unknown (CPU, unlisted GPU): MFU is then not reported."""
    if not device_name:
        return None
    for key, peaks in PEAK_TFLOPS.items():
        if key in device_name:
            return peaks.get(precision)
    return None


def mfu(tokens_per_second_per_device: float, flops_per_token: float, peak: float | None) -> float | None:
    """Model FLOPs utilization: achieved model FLOP/s per device over the device's peak TFLOP/s (a fraction)."""
    if peak is None:
        return None
    return tokens_per_second_per_device * flops_per_token / (peak * 1e12)
