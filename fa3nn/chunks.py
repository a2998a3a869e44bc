"""Chunked attention (Llama 4's local layers; FlashAttention-3's `attention_chunk`) as packed sequences.

With attention_chunk = C > 0, the keys of a sequence fall into chunks of C positions (keys 0..C-1, C..2C-1, ...) and
a query attends only to keys of its own chunk, besides what causal / window_size allow. A query's position is
aligned bottom-right as everywhere in fa3nn: query i of seqlen_q sits at key position i' = i + seqlen_k - seqlen_q,
in chunk floor(i' / C). This is FlashAttention-3's mask (hopper/mask.h: the window's limits clipped to
[round_down(i', C), round_down(i', C) + C)); queries before the first key (i' < 0, only when seqlen_q > seqlen_k)
are in a chunk of no keys here and get zeros.

Every chunk's queries and keys are consecutive rows, so the chunks are finer packed sequences: chunk c of a sequence
holds keys [cC, (c + 1)C) and the queries with i' in that range, both clipped to the sequence. Inside a chunk the
bottom-right alignment still maps i' - j to the same diagonal (the chunk's queries end where its keys end, or
before its first key), so causal and window_size apply unchanged. fa3nn therefore runs chunked attention as a
varlen call on refined cu_seqlens, forward and backward, on every backend that runs varlen (FlashAttention-3 has
the forward only).
"""

from __future__ import annotations

import functools

import torch

from fa3nn.checks import FP8_INPUT_DTYPES, SUPPORTED_DTYPES, check_cu_seqlens_values, check_varlen
from fa3nn.slots import PackedCall, check_not_capturing


@functools.lru_cache(maxsize=64)
def chunk_boundaries(starts_q: tuple[int, ...], starts_k: tuple[int, ...], chunk: int
                     ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(cu_seqlens_q, cu_seqlens_k, chunks per sequence) of the chunks of every sequence (module docstring); the
    queries before the first key (chunks c < 0, which hold no key) are one sequence. Remembered for the last
    boundaries seen (the same lengths come back every layer)."""
    cu_q, cu_k, per_sequence = [starts_q[0]], [starts_k[0]], []  # (rows before the first sequence stay out)
    for i in range(len(starts_q) - 1):
        seqlen_q, seqlen_k = starts_q[i + 1] - starts_q[i], starts_k[i + 1] - starts_k[i]
        if seqlen_q == 0 or seqlen_k == 0:
            ends = [(seqlen_q, seqlen_k)]
        else:
            offset = seqlen_k - seqlen_q  # query i sits at key position i + offset
            ends = [(min(-offset, seqlen_q), 0)] if offset < 0 else []  # key positions < 0: no keys
            ends += [(min(max((c + 1) * chunk - offset, 0), seqlen_q), min((c + 1) * chunk, seqlen_k))
                     for c in range((seqlen_k - 1) // chunk + 1)]
        cu_q += [starts_q[i] + end_q for end_q, _ in ends]
        cu_k += [starts_k[i] + end_k for _, end_k in ends]
        per_sequence.append(len(ends))
    return tuple(cu_q), tuple(cu_k), tuple(per_sequence)


def _chunked(call: PackedCall, chunk: int) -> PackedCall:
    check_varlen(call.q, call.k, call.v, call.cu_seqlens_q, call.cu_seqlens_k, call.max_seqlen_q, call.max_seqlen_k,
                 SUPPORTED_DTYPES + FP8_INPUT_DTYPES)  # before reading cu_seqlens (the call checks dtypes again)
    starts_q = check_cu_seqlens_values("cu_seqlens_q", call.cu_seqlens_q, call.q.shape[0], "max_seqlen_q",
                                       call.max_seqlen_q, within=True)
    starts_k = check_cu_seqlens_values("cu_seqlens_k", call.cu_seqlens_k, call.k.shape[0], "max_seqlen_k",
                                       call.max_seqlen_k, within=True)
    return call.refined(*chunk_boundaries(starts_q, starts_k, chunk))


def chunked(call: PackedCall, chunk: int) -> PackedCall:
    """The call with every sequence cut into its chunks (chunk > 0). Reads the boundaries on the host (remembered per
    tensor: fa3nn.checks); under torch.compile it runs eagerly, a graph break per call. Boundaries from the caller's
    tensors (call.caller_boundaries: cu_seqlens, seqused) would be replayed by a CUDA graph as captured: refused while
    capturing."""
    if call.caller_boundaries:
        check_not_capturing(call.q, "attention_chunk with cu_seqlens or seqused")
    if torch.compiler.is_compiling():
        return torch.compiler.disable(_chunked)(call, chunk)
    return _chunked(call, chunk)
