"""Attention sinks (gpt-oss): a learned logit per query head that joins every row's softmax but carries no value.

With scores s_1 .. s_n of a row and the sink logit a of its head, p_j = exp(s_j) / (sum_j exp(s_j) + exp(a)) and
out = sum_j p_j v_j. Against the attention without the sink (out_0, lse_0 = log sum_j exp(s_j)):

    out = out_0 * exp(lse_0) / (exp(lse_0) + exp(a)) = out_0 * sigmoid(lse_0 - a),   lse = logaddexp(lse_0, a)

so a sink can be one elementwise pass over the output (apply_sinks: the backends without it in their kernels, and
with_sinks, differentiable, for the FP8 forward), or one more term of each row's sum in the forward kernel's epilogue
(the native and Triton forwards: fa3nn::fwd takes the sinks). A row that attends no key keeps out = 0 and gets lse = a.
The factor is computed in float32 at least (gpt-oss's eager code computes the whole softmax in the inputs' dtype).

The backward needs no sink: with the sink's out and lse, every backend's backward (P = exp(score - lse),
D = rowsum(dout * out)) is already the gradient of the softmax with the sink for q, k and v, and the sink's own is
d a = sum over rows of exp(a - lse) * (dlse - D) (sinks_gradient; the native and Triton backwards take D from their own
row statistics).
"""

from __future__ import annotations

import torch

from fa3nn.checks import type_name


def check_sinks(sinks, nheads: int, device: torch.device) -> None:
    if not isinstance(sinks, torch.Tensor):
        raise TypeError(f"sinks must be a floating torch.Tensor (nheads,) = ({nheads},) or None, got "
                        f"{type_name(sinks)}")
    if not sinks.is_floating_point() or tuple(sinks.shape) != (nheads,) or sinks.device != device:
        raise ValueError(f"sinks must be a floating tensor of shape (nheads,) = ({nheads},) on {device}, got "
                         f"{sinks.dtype} {tuple(sinks.shape)} on {sinks.device}")


def _rows(lse: torch.Tensor, dense: bool) -> torch.Tensor:
    """lse (batch, nheads, seqlen) or (nheads, total) in out's row-major layout: (..., nheads)."""
    return lse.transpose(1, 2) if dense else lse.T


def _unrows(lse_rows: torch.Tensor, dense: bool) -> torch.Tensor:
    return lse_rows.transpose(1, 2) if dense else lse_rows.T


def _factor_and_lse(lse_rows: torch.Tensor, sinks_rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row and head: out's factor sigmoid(lse - sink) and the lse with the sink (a row that attended no key:
    0 and the sink, whatever the sink), in float32 at least (float64 stays float64: gradcheck)."""
    compute = torch.promote_types(lse_rows.dtype, torch.float32)
    lse_rows, sinks_rows = lse_rows.to(compute), sinks_rows.to(compute)
    unattended = torch.isneginf(lse_rows)
    factor = torch.where(unattended, 0.0, torch.sigmoid(lse_rows - sinks_rows))
    return factor, torch.where(unattended, sinks_rows, torch.logaddexp(lse_rows, sinks_rows))


def apply_sinks(out: torch.Tensor, lse: torch.Tensor, sinks: torch.Tensor | None
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """(out, lse) of the attention with a sink per head from the attention's own (module docstring), no autograd:
    the forwards whose kernels do not take sinks. Dense: out (batch, seqlen, nheads, d), lse (batch, nheads,
    seqlen); packed: out (total, nheads, d), lse (nheads, total). sinks None: (out, lse) as they are."""
    if sinks is None:
        return out, lse
    check_sinks(sinks, out.shape[-2], out.device)
    dense = out.dim() == 4
    lse_rows = _rows(lse, dense)
    factor, lse_new = _factor_and_lse(lse_rows, sinks.detach().expand(lse_rows.shape))
    return _scaled(out, factor), _unrows(lse_new, dense).to(lse.dtype)


def sinks_gradient(dout: torch.Tensor, out: torch.Tensor, lse: torch.Tensor, dlse: torch.Tensor | None,
                   sinks: torch.Tensor) -> torch.Tensor:
    """d loss / d sinks (nheads,) in sinks' dtype, from the forward's out and lse with the sink (module docstring):
    sum over rows of exp(sink - lse) * (dlse - rowsum(dout * out)), the row sums in float32 at least. Rows whose lse
    is -inf (a sink of -inf over a row with no key) contribute nothing. One pass over dout and out; the products are
    rounded to their dtype before the float32 sum (the native backward forms them in float32: up to 3% apart on
    causal rows' sinks at bf16, H100 s37a)."""
    compute = torch.promote_types(lse.dtype, torch.float32)
    delta = _unrows((dout * out).sum(-1, dtype=compute), out.dim() == 4)  # rowsum(dout * out), in lse's layout
    return sinks_gradient_of_delta(sinks, lse, delta if dlse is None else delta - dlse.to(compute))


def sinks_gradient_of_delta(sinks: torch.Tensor, lse: torch.Tensor, delta: torch.Tensor, log2: bool = False
                            ) -> torch.Tensor:
    """sinks_gradient from each row's lse and delta = rowsum(dout * out) - dlse, laid out alike with the heads second
    to last ((batch, nheads, rows), (nheads, total), the native backward's (batch, nheads, rows) workspaces):
    -sum over rows of exp(sink - lse) * delta, in float32 at least. `log2`: lse in log2 units (the native
    backward's lse_log2, +inf on rows without a query: weight 0). The backwards that compute delta themselves (native,
    Triton) call this on theirs."""
    compute = torch.promote_types(lse.dtype, torch.float32)
    lse = lse.to(compute)
    sinks_at = sinks.detach().to(compute)[:, None]
    if log2:
        weight = torch.exp2(sinks_at * 1.4426950408889634 - lse)
    else:
        weight = torch.where(torch.isneginf(lse), 0.0, torch.exp(sinks_at - lse))  # the sink's probability per row
    gradient = -(weight * delta.to(compute))
    return gradient.sum(dim=[d for d in range(gradient.dim()) if d != gradient.dim() - 2]).to(sinks.dtype)


def _scaled(x: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """x * factor[..., None] in x's dtype, computed in factor's (float32) in one pass: out= lets the elementwise kernel
    widen, multiply and round (three passes over x and two float32 copies through .to(); measured on the H200 at
    d128 4k causal: the sink forward at 1.63x the plain one that way)."""
    scaled = torch.empty_like(x)
    return torch.mul(x, factor.unsqueeze(-1), out=scaled)


class _SinkCorrection(torch.autograd.Function):
    """(out, lse, sinks) -> (out * f, logaddexp(lse, sink)) with f = sigmoid(lse - sink) per row and head, in out's
    row-major layout (f: (rows..., nheads) matching out's leading dims). Saves out itself, the tensor the attention
    saved already: autograd's own chain kept a float32 copy of out per layer (+80% of a bf16 layer's saved bytes)."""

    @staticmethod
    def forward(ctx, out, lse_rows, sinks_rows):
        factor, lse_new = _factor_and_lse(lse_rows, sinks_rows)
        ctx.save_for_backward(out, factor)
        return _scaled(out, factor), lse_new

    @staticmethod
    def backward(ctx, dout, dlse):
        out, factor = ctx.saved_tensors
        # d(out * f) / df per row and head: products in out's dtype, summed in float32 (two passes, no float32 copy)
        d_factor = (dout * out).sum(-1, dtype=factor.dtype)
        d_shift = d_factor * factor * (1 - factor)  # d sigmoid(lse - sink)
        dout_new = _scaled(dout, factor)
        dlse_new = d_shift + (0 if dlse is None else dlse * factor)
        dsinks = -d_shift + (0 if dlse is None else dlse * (1 - factor))
        return dout_new, dlse_new, dsinks


def with_sinks(out: torch.Tensor, lse: torch.Tensor, sinks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """apply_sinks, differentiable in out, lse and sinks (the FP8 forward's path: its op takes no sinks)."""
    check_sinks(sinks, out.shape[-2], out.device)
    dense = out.dim() == 4
    lse_rows = _rows(lse, dense)
    out_new, lse_new = _SinkCorrection.apply(out, lse_rows, sinks.expand(lse_rows.shape))
    return out_new, _unrows(lse_new, dense).to(lse.dtype)
