"""The exact reference backend: pure PyTorch, any device, every feature. It is the CPU path and the oracle.

Computes one step wider than its inputs and casts the output back: float32 for float16/bfloat16 inputs, float64 for
float32/float64 inputs (the same upcast rule as fa3nn.testing.attention_ref), so it is an oracle at every dtype and
gradcheck sees exact float64 arithmetic.
Queries are processed in chunks so that the score matrix of one chunk stays under `SCORE_BUDGET` elements:
a CPU call at seqlen 8192 never holds a full seqlen^2 matrix per head.

GQA/MQA never repeats K/V: the `group = nheads // nheads_kv` query heads that share a K/V head are folded into the
row dimension, so one (group * rows, headdim) x (headdim, seqlen_k) matmul per K/V head serves all of them.

The backward is written out (not autograd through the forward) with the same formulas a kernel uses:
    P = exp(S - lse),  dV = P^T dO,  dP = dO V^T,  dS = P * (dP - delta),  delta = rowsum(P * dP) - dlse,
    dQ = scale * dS' K,  dK = scale * dS'^T Q,  with dS' = dS * (1 - tanh^2) under softcap.
Kernels, which tile over keys, read the saved float32 lse and compute delta as rowsum(dO * O) from the rounded
output; this backend holds whole rows and takes the exact rowsum(P * dP) (so it cancels exactly where autograd's
softmax backward does, e.g. at seqlen_k = 1), with P from the saved lse as every backward takes it (float64 for
float32 inputs, saved_lse_dtype): an lse that includes more than the scores (fa3nn.sinks) makes this the gradient of
that softmax, and after an FP8 forward P is the high-precision scores against the FP8 forward's lse, as on the GPU
(until the thirty-seventh session this backend recomputed lse from q and k).
"""

from __future__ import annotations

import torch

from fa3nn.backends.base import AttnCall, AttnParams, Backend, Varlen, saved_lse_dtype
from fa3nn.sinks import apply_sinks

# Elements of one chunk's score matrix (float32: 64 MiB); a few temporaries of this size live at once.
SCORE_BUDGET = 1 << 24


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype in (torch.float32, torch.float64) else torch.float32


def _chunk_rows(batch: int, nheads: int, seqlen_q: int, seqlen_k: int) -> int:
    return max(1, min(seqlen_q, SCORE_BUDGET // max(1, batch * nheads * seqlen_k)))


class _Scores:
    """Scaled, soft-capped, masked scores of one query chunk, in the folded (b, hk, group * rows, seqlen_k) layout."""

    def __init__(self, q_chunk, k_t, params: AttnParams, row_start: int, seqlen_q: int, seqlen_k: int):
        b, rows, hk, group, _ = q_chunk.shape
        q_folded = q_chunk.permute(0, 2, 3, 1, 4).reshape(b, hk, group * rows, -1)
        scores = torch.matmul(q_folded, k_t) * params.softmax_scale
        self.tanh = None
        if params.softcap > 0:
            self.tanh = torch.tanh(scores / params.softcap)
            scores = self.tanh * params.softcap
        allowed = params.window.allowed(row_start, row_start + rows, seqlen_q, seqlen_k, q_chunk.device)
        if allowed is not None:
            scores = scores.view(b, hk, group, rows, seqlen_k).masked_fill(~allowed, float("-inf"))
            scores = scores.view(b, hk, group * rows, seqlen_k)
        self.q_folded = q_folded
        self.values = scores

    def probs(self, lse_folded: torch.Tensor) -> torch.Tensor:
        # A row that attends nothing has lse = -inf; subtract 0 there so its probabilities are exp(-inf) = 0.
        safe = torch.where(torch.isneginf(lse_folded), torch.zeros_like(lse_folded), lse_folded)
        return torch.exp(self.values - safe.unsqueeze(-1))


def _fold_rows(x: torch.Tensor, hk: int) -> torch.Tensor:
    """(b, rows, h, ...) -> (b, hk, group * rows, ...), query heads of one K/V head folded into rows."""
    b, rows, h = x.shape[:3]
    tail = x.shape[3:]
    return x.reshape(b, rows, hk, h // hk, *tail).permute(0, 2, 3, 1, *range(4, 4 + len(tail))).reshape(
        b, hk, (h // hk) * rows, *tail
    )


def _unfold_rows(x: torch.Tensor, rows: int) -> torch.Tensor:
    """Inverse of _fold_rows: (b, hk, group * rows, ...) -> (b, rows, h, ...)."""
    b, hk = x.shape[:2]
    tail = x.shape[3:]
    group = x.shape[2] // rows
    return x.reshape(b, hk, group, rows, *tail).permute(0, 3, 1, 2, *range(4, 4 + len(tail))).reshape(
        b, rows, hk * group, *tail
    )


def forward_dense(q, k, v, params: AttnParams):
    """q (b, sq, h, d), k/v (b, sk, hk, d[v]) -> out (b, sq, h, dv) in q's dtype, lse (b, h, sq) (saved_lse_dtype)."""
    b, seqlen_q, h, _ = q.shape
    seqlen_k, hk = k.shape[1], k.shape[2]
    cdtype = _compute_dtype(q.dtype)
    k_t = k.to(cdtype).permute(0, 2, 3, 1)  # (b, hk, d, sk)
    v_c = v.to(cdtype).permute(0, 2, 1, 3)  # (b, hk, sk, dv)
    out = torch.empty(b, seqlen_q, h, v.shape[-1], dtype=q.dtype, device=q.device)
    lse = torch.empty(b, h, seqlen_q, dtype=saved_lse_dtype(q.dtype), device=q.device)
    q_grouped = q.view(b, seqlen_q, hk, h // hk, q.shape[-1])
    step = _chunk_rows(b, h, seqlen_q, seqlen_k)
    for start in range(0, seqlen_q, step):
        end = min(seqlen_q, start + step)
        scores = _Scores(q_grouped[:, start:end].to(cdtype), k_t, params, start, seqlen_q, seqlen_k)
        lse_folded = torch.logsumexp(scores.values, dim=-1)  # -inf for rows that attend nothing
        out_folded = torch.matmul(scores.probs(lse_folded), v_c)
        out[:, start:end] = _unfold_rows(out_folded, end - start).to(q.dtype)
        lse[:, :, start:end] = _unfold_rows(lse_folded, end - start).transpose(1, 2).to(lse.dtype)
    return out, lse


def backward_dense(dout, q, k, v, out, lse, dlse, params: AttnParams):
    b, seqlen_q, h, _ = q.shape
    seqlen_k, hk = k.shape[1], k.shape[2]
    cdtype = _compute_dtype(q.dtype)
    k_c = k.to(cdtype).permute(0, 2, 1, 3)  # (b, hk, sk, d)
    v_c = v.to(cdtype).permute(0, 2, 1, 3)  # (b, hk, sk, dv)
    dlse = None if dlse is None else dlse.to(cdtype).transpose(1, 2)  # (b, sq, h)
    dq = torch.empty_like(q)
    dk = torch.zeros(b, hk, seqlen_k, k.shape[-1], dtype=cdtype, device=q.device)
    dv = torch.zeros(b, hk, seqlen_k, v.shape[-1], dtype=cdtype, device=q.device)
    q_grouped = q.view(b, seqlen_q, hk, h // hk, q.shape[-1])
    step = _chunk_rows(b, h, seqlen_q, seqlen_k)
    for start in range(0, seqlen_q, step):
        end, rows = min(seqlen_q, start + step), min(seqlen_q, start + step) - start
        scores = _Scores(q_grouped[:, start:end].to(cdtype), k_c.transpose(2, 3), params, start, seqlen_q, seqlen_k)
        # P from the forward's lse, as every backward takes it: an lse that includes more than the scores (fa3nn.sinks)
        # makes this the gradient of that softmax
        probs = scores.probs(_fold_rows(lse.transpose(1, 2)[:, start:end].to(cdtype), hk))
        dout_folded = _fold_rows(dout[:, start:end].to(cdtype), hk)
        dv += torch.matmul(probs.transpose(2, 3), dout_folded)
        dprobs = torch.matmul(dout_folded, v_c.transpose(2, 3))
        delta = (probs * dprobs).sum(-1, keepdim=True)
        if dlse is not None:
            delta = delta - _fold_rows(dlse[:, start:end], hk).unsqueeze(-1)
        dscores = probs * (dprobs - delta)
        if scores.tanh is not None:
            dscores = dscores * (1 - scores.tanh * scores.tanh)
        dscores = dscores * params.softmax_scale
        dq[:, start:end] = _unfold_rows(torch.matmul(dscores, k_c), rows).to(q.dtype)
        dk += torch.matmul(dscores.transpose(2, 3), scores.q_folded)
    return dq, dk.transpose(1, 2).to(k.dtype), dv.transpose(1, 2).to(v.dtype)


def _per_sequence(varlen: Varlen):
    for i in range(varlen.batch):
        yield (
            slice(varlen.seqstarts_q[i], varlen.seqstarts_q[i + 1]),
            slice(varlen.seqstarts_k[i], varlen.seqstarts_k[i + 1]),
        )


class ReferenceBackend(Backend):
    name = "reference"
    twice_differentiable = True  # backward_dense: torch ops on saved tensors (test_varlen_and_gradcheck)

    def refusal(self, call: AttnCall, backward: bool) -> str | None:
        return None  # every device, dtype, head dim and feature

    def forward(self, q, k, v, params, varlen, sinks=None):
        if varlen is None:
            return apply_sinks(*forward_dense(q, k, v, params), sinks)
        out = torch.empty(*q.shape[:-1], v.shape[-1], dtype=q.dtype, device=q.device)
        lse = torch.empty(q.shape[1], q.shape[0], dtype=saved_lse_dtype(q.dtype), device=q.device)
        for rows_q, rows_k in _per_sequence(varlen):
            o, s = forward_dense(q[rows_q][None], k[rows_k][None], v[rows_k][None], params)
            out[rows_q], lse[:, rows_q] = o[0], s[0]
        return apply_sinks(out, lse, sinks)

    def backward(self, dout, q, k, v, out, lse, dlse, params, varlen):
        if varlen is None:
            return backward_dense(dout, q, k, v, out, lse, dlse, params)
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        for rows_q, rows_k in _per_sequence(varlen):
            grads = backward_dense(
                dout[rows_q][None], q[rows_q][None], k[rows_k][None], v[rows_k][None], out[rows_q][None],
                lse[:, rows_q][None], None if dlse is None else dlse[:, rows_q][None], params,
            )
            dq[rows_q], dk[rows_k], dv[rows_k] = (g[0] for g in grads)
        return dq, dk, dv
