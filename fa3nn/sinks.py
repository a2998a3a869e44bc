"""Attention sinks (gpt-oss): a learned logit per query head that joins every row's softmax but carries no value.

With scores s_1 .. s_n of a row and the sink logit a of its head, p_j = exp(s_j) / (sum_j exp(s_j) + exp(a)) and
out = sum_j p_j v_j. Against the attention without the sink (out_0, lse_0 = log sum_j exp(s_j)):

    out = out_0 * exp(lse_0) / (exp(lse_0) + exp(a)) = out_0 * sigmoid(lse_0 - a),   lse = logaddexp(lse_0, a)

so a sink needs no kernel: one elementwise pass over the output, differentiable through lse_0 (every fa3nn backward
takes lse's gradient) and through the sinks themselves. A row that attends no key keeps out = 0 and gets lse = a. The
factor is computed in float32 at least (gpt-oss's eager code computes the whole softmax in the inputs' dtype).
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


def with_sinks(out: torch.Tensor, lse: torch.Tensor, sinks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(out, lse) of attention with a sink per head (module docstring), from the attention's own. Dense: out (batch,
    seqlen, nheads, d), lse (batch, nheads, seqlen); packed: out (total, nheads, d), lse (nheads, total)."""
    check_sinks(sinks, out.shape[-2], out.device)
    compute = torch.promote_types(lse.dtype, torch.float32)  # float64 stays float64 (gradcheck)
    logits = sinks.to(compute)
    logits = logits[None, :, None] if out.dim() == 4 else logits[:, None]  # lse's layout
    factor = torch.sigmoid(lse.to(compute) - logits)
    factor = factor.transpose(1, 2) if out.dim() == 4 else factor.T  # out's row-major layout
    return (out.to(compute) * factor[..., None]).to(out.dtype), torch.logaddexp(lse.to(compute), logits).to(lse.dtype)
