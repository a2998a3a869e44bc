"""torch.library custom ops: `fa3nn::fwd`, `fa3nn::fwd_fp8` and `fa3nn::bwd`, with fake (meta) and autograd
registrations so that torch.compile(fullgraph=True) sees one opaque node per attention call and never breaks the graph.

Both ops take dense (batch, seqlen, nheads, headdim) tensors when cu_seqlens_q is None, else packed
(total_tokens, nheads, headdim) tensors with int32 cu_seqlens. Backend choice happens inside the op, at run time,
so the traced graph does not depend on which backends are installed.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import torch
from torch import Tensor
from torch._subclasses.fake_tensor import is_fake  # (loaded with torch itself)

from fa3nn.autocast import autocast_off
from fa3nn.backends import hopper_fp8
from fa3nn.backends.base import AttnCall, AttnParams, Varlen, saved_lse_dtype
from fa3nn.backends.hopper import varlen_deal_for
from fa3nn.checks import check_cu_seqlens_values, wants_deterministic
from fa3nn.dispatch import FP8_FORWARD_PATHS, resolve, resolve_fp8
from fa3nn.fa3_compat import note_sm_margin
from fa3nn.fp8 import backward as fp8_backward
from fa3nn.fp8 import inputs as fp8_inputs
from fa3nn.fp8.operands import to_operands
from fa3nn.fp8.quantize import quantize_qkv_tensors
from fa3nn.fp8.reference import attention_fp8
from fa3nn.fp8.scaling import E4M3
from fa3nn.masks import Window
from fa3nn.sinks import apply_sinks, check_sinks, sinks_gradient
from fa3nn.spans import RowSpan


def _params(softmax_scale, window_left, window_right, softcap, deterministic, sm_margin=0) -> AttnParams:
    return AttnParams(float(softmax_scale), Window(window_left, window_right), float(softcap),
                      wants_deterministic(deterministic), sm_margin)


def _varlen(q, k, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k) -> Varlen | None:
    if cu_seqlens_q is None:
        return None
    starts_q = check_cu_seqlens_values("cu_seqlens_q", cu_seqlens_q, q.shape[0], "max_seqlen_q", max_seqlen_q,
                                       within=True)
    starts_k = check_cu_seqlens_values("cu_seqlens_k", cu_seqlens_k, k.shape[0], "max_seqlen_k", max_seqlen_k,
                                       within=True)
    return Varlen(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, starts_q, starts_k)


def _lse_shape(q: Tensor, varlen: bool) -> tuple[int, ...]:
    return (q.shape[1], q.shape[0]) if varlen else (q.shape[0], q.shape[2], q.shape[1])


def _outputs_like(q: Tensor, v: Tensor, varlen: bool, out_dtype: torch.dtype | None = None) -> tuple[Tensor, Tensor]:
    """Uninitialized (out, lse) of the shapes and dtypes every forward op returns (its fake implementation); out in
    q's dtype unless out_dtype says otherwise (FP8 inputs)."""
    out_dtype = out_dtype or q.dtype
    lse = q.new_empty(_lse_shape(q, varlen), dtype=saved_lse_dtype(out_dtype))
    return q.new_empty(*q.shape[:-1], v.shape[-1], dtype=out_dtype), lse


def _nothing_attended(q: Tensor, v: Tensor, varlen: bool, out_dtype: torch.dtype | None = None
                      ) -> tuple[Tensor, Tensor]:
    """(zeros, -inf) outputs: the result when there is no query or no key at all (empty batch or sequence)."""
    out, lse = _outputs_like(q, v, varlen, out_dtype)
    return out.zero_(), lse.fill_(float("-inf"))


def _forward_impl(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    cu_seqlens_q: Optional[Tensor],
    cu_seqlens_k: Optional[Tensor],
    max_seqlen_q: int,
    max_seqlen_k: int,
    softmax_scale: float,
    window_left: int,
    window_right: int,
    softcap: float,
    deterministic: bool,
    backend: str,
    sinks: Optional[Tensor] = None,
    sm_margin: int = 0,
) -> tuple[Tensor, Tensor]:
    """sinks (nheads,) or None: gpt-oss's sink logits (fa3nn.sinks), out and lse then those of the softmax with the
    sink; fa3nn::bwd takes them too and adds their gradient. sm_margin: SMs to leave free (AttnParams), fa3nn::bwd's
    too. Packed rows outside every sequence: fa3nn.spans."""
    with autocast_off(q.device):  # (fa3nn.autocast)
        params = _params(softmax_scale, window_left, window_right, softcap, deterministic, sm_margin)
        varlen = _varlen(q, k, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
        span = RowSpan.of(varlen, q.shape[0], k.shape[0])
        if span is None:
            return _forward_rows(q, k, v, params, varlen, backend, sinks)
        out, lse = _forward_rows(span.q(q), span.k(k), span.k(v), params, span.inner(varlen), backend, sinks)
        return span.spread_q(out), span.spread_lse(lse)


def _forward_rows(q, k, v, params: AttnParams, varlen: Varlen | None, backend: str, sinks) -> tuple[Tensor, Tensor]:
    """_forward_impl's work on rows that every sequence covers."""
    chosen = resolve(backend, AttnCall.of(q, k, v, params, varlen is not None))
    note_sm_margin(params.sm_margin, chosen.honours_sm_margin, chosen.name)
    if sinks is not None:
        check_sinks(sinks, q.shape[-2], q.device)
    if q.numel() == 0 or k.numel() == 0:  # empty batch/sequence, or no keys at all: nothing to attend
        return apply_sinks(*_nothing_attended(q, v, varlen is not None), sinks)
    return chosen.forward(q, k, v, params, varlen, sinks)


attention_forward = torch.library.custom_op("fa3nn::fwd", _forward_impl, mutates_args=())
SINKS_INPUT = 13  # fa3nn::fwd's sinks, after backend
SM_MARGIN_INPUT = 14  # and its sm_margin


@attention_forward.register_fake
def _(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, window_left, window_right,
      softcap, deterministic, backend, sinks=None, sm_margin=0):
    return _outputs_like(q, v, cu_seqlens_q is not None)


def _backward_impl(
    dout: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    out: Tensor,
    lse: Tensor,
    dlse: Optional[Tensor],
    cu_seqlens_q: Optional[Tensor],
    cu_seqlens_k: Optional[Tensor],
    max_seqlen_q: int,
    max_seqlen_k: int,
    softmax_scale: float,
    window_left: int,
    window_right: int,
    softcap: float,
    deterministic: bool,
    backend: str,
    sinks: Optional[Tensor] = None,
    sm_margin: int = 0,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(dq, dk, dv, dsinks): with the forward's sinks (its out and lse include them), their gradient (the
    backend's backward_with_sinks); without, an empty tensor in its place."""
    with autocast_off(dout.device):  # (fa3nn.autocast)
        params = _params(softmax_scale, window_left, window_right, softcap, deterministic, sm_margin)
        varlen = _varlen(q, k, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
        span = RowSpan.of(varlen, q.shape[0], k.shape[0])
        if span is None:
            return _backward_rows(dout, q, k, v, out, lse, dlse, params, varlen, backend, sinks)
        dq, dk, dv, dsinks = _backward_rows(span.q(dout), span.q(q), span.k(k), span.k(v), span.q(out), span.lse(lse),
                                            span.lse(dlse), params, span.inner(varlen), backend, sinks)
        return span.spread_q(dq), span.spread_k(dk), span.spread_k(dv), dsinks


def _backward_rows(dout, q, k, v, out, lse, dlse, params: AttnParams, varlen: Varlen | None, backend: str, sinks
                   ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """_backward_impl's work on rows that every sequence covers."""
    chosen = resolve(backend, AttnCall.of(q, k, v, params, varlen is not None), backward=True)
    note_sm_margin(params.sm_margin, chosen.honours_sm_margin, chosen.name)
    if q.numel() == 0 or k.numel() == 0:
        dsinks = q.new_empty(0) if sinks is None else sinks_gradient(dout, out, lse, dlse, sinks)
        return *(t.new_zeros(t.shape) for t in (q, k, v)), dsinks
    if dout.stride(-1) != 1:
        dout = dout.contiguous()
    # Gradients are contiguous whatever the inputs' strides (the fake impl promises that layout).
    if sinks is None:
        grads = (*chosen.backward(dout, q, k, v, out, lse, dlse, params, varlen), q.new_empty(0))
    else:
        grads = chosen.backward_with_sinks(dout, q, k, v, out, lse, dlse, params, varlen, sinks)
    return tuple(g.contiguous() for g in grads)


attention_backward = torch.library.custom_op("fa3nn::bwd", _backward_impl, mutates_args=())


@attention_backward.register_fake
def _(dout, q, k, v, out, lse, dlse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale,
      window_left, window_right, softcap, deterministic, backend, sinks=None, sm_margin=0):
    return *(t.new_empty(t.shape) for t in (q, k, v)), (q.new_empty(0) if sinks is None else sinks.new_empty(
        sinks.shape))


def _setup_context(ctx, inputs, output, sinks=None, sm_margin=0, extra=()):
    """Shared by fa3nn::fwd and fa3nn::fwd_fp8: both start with fa3nn::bwd's arguments (fwd_fp8 appends the recipe's,
    fwd the sinks) and both backwards are the bf16 fa3nn::bwd with the forward's sm_margin, from the q, k, v in
    `inputs` (fwd_fp8 may put its quantized q and k there: _setup_fwd_fp8). `extra` tensors are saved after them."""
    q, k, v, cu_seqlens_q, cu_seqlens_k = inputs[:5]
    out, lse = output[:2]
    ctx.save_for_backward(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, sinks, *extra)
    ctx.scalars = inputs[5:13]  # max_seqlen_q ... backend: fa3nn::bwd's trailing arguments
    ctx.sm_margin = sm_margin
    ctx.num_inputs = len(inputs)


def _input(inputs, index: int, default):
    """inputs[index], or `default` where the call left that trailing argument out."""
    return inputs[index] if len(inputs) > index else default


def _setup_fwd(ctx, inputs, output):
    """fa3nn::fwd's: _setup_context's, with its sinks (None without) and sm_margin."""
    _setup_context(ctx, inputs, output, _input(inputs, SINKS_INPUT, None), _input(inputs, SM_MARGIN_INPUT, 0))


def _gradients(backward, ctx, dout, dlse, saved=None) -> tuple:
    """q, k, v's gradients from the tensors _setup_context saved (or `saved`, the same eight), through `backward`
    (fa3nn::bwd, or its implementation in eager mode), the sinks' (its fourth output) where fa3nn::fwd had some, and
    None for every other input."""
    q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, sinks = saved or ctx.saved_tensors[:8]
    dq, dk, dv, dsinks = backward(dout, q, k, v, out, lse, dlse, cu_seqlens_q, cu_seqlens_k, *ctx.scalars, sinks,
                                  ctx.sm_margin)
    gradients = [dq, dk, dv] + [None] * (ctx.num_inputs - 3)
    if sinks is not None:
        gradients[SINKS_INPUT] = dsinks
    return tuple(gradients)


def _backward(ctx, dout, dlse, *unused_grads):  # fwd_fp8's amax output has no gradient
    return _gradients(attention_backward, ctx, dout, dlse)


attention_forward.register_autograd(_backward, setup_context=_setup_fwd)


class _EagerAttention(torch.autograd.Function):
    """fa3nn::fwd and fa3nn::bwd's implementations without the custom-op dispatcher, for eager mode. The Python
    custom-op machinery (argument normalization, redispatch, the generated autograd wrapper) measured ~0.3 ms of host
    time per layer forward+backward on this project's CPU machine (750 -> 440 us for a small call), more than the
    whole call costs the GPU at short sequence lengths. Same functions, same saved tensors (_setup_context), same
    gradients (an unused lse gets a zero gradient in both: autograd materializes it)."""

    @staticmethod
    def forward(ctx, q, k, v, *arguments):  # arguments: fa3nn::fwd's, after v
        output = _forward_impl(q, k, v, *arguments)
        _setup_fwd(ctx, (q, k, v, *arguments), output)
        return output

    @staticmethod
    def backward(ctx, dout, dlse):
        # unpacked once: torch.utils.checkpoint (non-reentrant) refuses a second unpack of the same saved tensors
        saved = ctx.saved_tensors
        refusal = _double_backward_refusal(ctx, saved) if torch.is_grad_enabled() else None  # create_graph=True
        if refusal is None:
            return _gradients(_backward_impl, ctx, dout, dlse, saved[:8])
        with torch.no_grad():
            gradients = _gradients(_backward_impl, ctx, dout, dlse, saved[:8])
        q, k, v, *_, sinks = saved  # with dout and dlse: what a second derivative reaches through them
        return _OnceDifferentiable.apply(refusal, len(gradients), *gradients, q, k, v, sinks, dout, dlse)


def _double_backward_refusal(ctx, saved) -> str | None:
    """None where the backward's gradients can be differentiated again (the reference backend's, without sinks:
    Backend.twice_differentiable), else the error a double backward raises. A kernel's gradients carry no autograd
    history and fa3nn.sinks' gradient detaches the sinks: taken with create_graph=True, a gradient penalty on them
    would be silently dropped (or wrong in the sinks)."""
    q, k, v, _, _, cu_seqlens_q, _, sinks = saved
    max_seqlen_q, max_seqlen_k, softmax_scale, window_left, window_right, softcap, deterministic, backend = ctx.scalars
    params = _params(softmax_scale, window_left, window_right, softcap, deterministic, ctx.sm_margin)
    chosen = resolve(backend, AttnCall.of(q, k, v, params, cu_seqlens_q is not None), backward=True)
    if chosen.twice_differentiable and sinks is None:
        return None
    why = "sinks" if chosen.twice_differentiable else f"the {chosen.name} backend's backward"
    return (f"fa3nn attention with {why} does not support double backward (differentiating gradients taken with "
            f"create_graph=True, e.g. a gradient penalty); only backend='reference' without sinks does (slow)")


class _OnceDifferentiable(torch.autograd.Function):
    """The gradients as they are, from a node whose backward raises `refusal`, on the tensors a second derivative
    reaches (q, k, v, sinks, dout, dlse): torch's once_differentiable, with a message that says why and a node on q,
    k, v too (it hangs on backward's arguments alone: a penalty after out.sum(), whose dout needs no gradient, went
    through)."""

    @staticmethod
    def forward(ctx, refusal, num_gradients, *gradients_then_inputs):
        ctx.refusal = refusal
        gradients = gradients_then_inputs[:num_gradients]
        return tuple(None if g is None else g.detach() for g in gradients)  # detach: not views of the inputs

    @staticmethod
    def backward(ctx, *unused):
        raise RuntimeError(ctx.refusal)


TRANSFORMS_REFUSAL = (
    "fa3nn attention does not support torch.func transforms (vmap, grad, jvp, jacrev, jacfwd) or forward-mode AD "
    "(torch.autograd.forward_ad): its ops have no forward-mode derivative and no functorch rules. Take gradients with "
    "loss.backward() or torch.autograd.grad, and loop over a batch instead of vmap"
)


def _transforms_active() -> bool:
    """torch._C._are_functorch_transforms_active, a private binding (torch 2.x, 2.11 on the GPU machine and 2.13 here):
    read through getattr so a torch without it skips this check instead of failing every call."""
    active = getattr(torch._C, "_are_functorch_transforms_active", None)
    return active is not None and active()


def check_no_function_transforms(*tensors: Tensor | None) -> None:
    """Refuse torch.func transforms and forward-mode dual inputs with TRANSFORMS_REFUSAL. Without it, eager calls
    failed with torch's generic autograd.Function message (setup_context / jvp staticmethod), and compiled calls lost
    the tangent without a word (jvp: zeros; dual tensors: none): the custom op's autograd runs its no-grad forward
    when no input requires grad."""
    if _transforms_active():  # (Dynamo traces this one)
        raise RuntimeError(TRANSFORMS_REFUSAL)
    if getattr(torch.autograd.forward_ad, "_current_level", -1) >= 0:  # inside a dual_level only: no graph break
        # Under torch.compile, eagerly on the real inputs (Dynamo's unpack_dual sees no tangent). The disabled copy
        # is made only while compiling: as an import-time decorator torch.compiler.disable imports dynamo and triton
        # with `import fa3nn` (fa3nn.memo says why that must not happen).
        if torch.compiler.is_compiling():
            torch.compiler.disable(_check_no_tangents)(tensors)
        else:
            _check_no_tangents(tensors)


def _check_no_tangents(tensors) -> None:
    if any(t is not None and torch.autograd.forward_ad.unpack_dual(t).tangent is not None for t in tensors):
        raise RuntimeError(TRANSFORMS_REFUSAL)


def attention_call(q, k, v, *arguments, sinks=None, sm_margin=0) -> tuple[Tensor, Tensor]:
    """fa3nn::fwd with its autograd: the registered custom op where torch.compile traces (one opaque node per call),
    the same implementation through a plain autograd.Function in eager mode (see _EagerAttention). arguments:
    fa3nn::fwd's from cu_seqlens_q to backend."""
    if torch.compiler.is_compiling() or _holds_no_values(q):
        return attention_forward(q, k, v, *arguments, sinks, sm_margin)
    return _EagerAttention.apply(q, k, v, *arguments, sinks, sm_margin)


def _holds_no_values(t: Tensor) -> bool:
    """A meta or fake tensor: the op's fake implementation gives the shapes without reading any value (the eager
    path reads cu_seqlens, which they cannot give: 'Cannot copy out of meta tensor', DataDependentOutputException)."""
    return t.device.type == "meta" or is_fake(t)


def _forward_fp8_impl(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    cu_seqlens_q: Optional[Tensor],
    cu_seqlens_k: Optional[Tensor],
    max_seqlen_q: int,
    max_seqlen_k: int,
    softmax_scale: float,
    window_left: int,
    window_right: int,
    softcap: float,
    deterministic: bool,
    backend: str,
    block_q: int,
    block_k: int,
    rotation: Optional[Tensor],
    tensor_scales: Optional[Tensor],
    fast_exp2: bool = False,
    sm_margin: int = 0,
    backward_from_quantized: bool = False,
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """The FP8 forward: `fa3nn::fwd`'s arguments plus the recipe as numbers (fa3nn.fp8.recipe_arguments: rows per
    scale tile, the Hadamard rotation or None, per-tensor scales or None), its fast_exp2 and sm_margin, and whether
    the backward reads the quantized Q and K (the recipe's backward_from). Returns out (q's dtype), lse, the (3,)
    float32 amax of Q, K, V as quantized (which delayed scaling records), then q8, k8 (e4m3 bits as uint8) and their
    float32 descales (empty unless backward_from_quantized). The backward is the bf16 one (`fa3nn::bwd`), from q8 and k8
    dequantized, the rotation undone, or from the high-precision q, k (fa3nn.fp8.backward)."""
    with autocast_off(q.device):  # (fa3nn.autocast)
        params = _params(softmax_scale, window_left, window_right, softcap, deterministic, sm_margin)
        varlen = _varlen(q, k, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
        refuse_fp8_recipe_span(RowSpan.of(varlen, q.shape[0], k.shape[0]))
        call = AttnCall.of(q, k, v, params, varlen is not None)
        keys = max_seqlen_k if varlen is not None else k.shape[1]  # the longest key sequence
        chosen = resolve_fp8(backend, call, block_k, keys)  # or raises
        note_sm_margin(sm_margin, FP8_FORWARD_PATHS[chosen].sm_margin, FP8_FORWARD_PATHS[chosen].description)
        if q.numel() == 0 or k.numel() == 0:
            return (*_nothing_attended(q, v, varlen is not None), torch.zeros(3, dtype=torch.float32, device=q.device),
                    *fp8_backward.empty_quantized(q, k, block_q, block_k, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                                  max_seqlen_k, backward_from_quantized))
        kernel = FP8_FORWARD_PATHS[chosen].kernel
        if kernel is None:  # the emulation of the kernels' rounding points (fa3nn.fp8.reference), any device
            quantized = quantize_qkv_tensors(q, k, v, block_q, block_k, rotation, tensor_scales, cu_seqlens_q,
                                             cu_seqlens_k, max_seqlen_q, max_seqlen_k)
            out, lse = _fp8_emulation(quantized, params, call, block_k, keys, cu_seqlens_q, cu_seqlens_k, q.dtype,
                                      fast_exp2)
            return out, lse, quantized.amax.to(torch.float32), *_kept_for_backward(quantized, backward_from_quantized)
        from fa3nn.backends.triton.quantize import quantize_fused  # imports triton: only where a kernel path runs

        operands = quantize_fused(q, k, v, block_q, block_k, rotation, tensor_scales, cu_seqlens_q, cu_seqlens_k,
                                  max_seqlen_q, max_seqlen_k)
        out, lse = _fp8_kernel(chosen, operands, params, varlen, max_seqlen_q, max_seqlen_k, q.dtype, fast_exp2)
        return out, lse, operands.amax, *_kept_for_backward(operands, backward_from_quantized)


def refuse_fp8_recipe_span(span: RowSpan | None) -> None:
    """An FP8 recipe's per-tile scales and saved e4m3 Q / K are laid out by the sequences' rows, so its calls take
    cu_seqlens that cover every packed row (FlashAttention-3's own FP8 call, e4m3 inputs, takes others:
    fa3nn.spans)."""
    if span is None:
        return
    rows = [f"{name}[0] = {r.start}, {name}[-1] = {r.stop} of {total} rows"
            for name, r, total in (("cu_seqlens_q", span.q_rows, span.total_q), ("cu_seqlens_k", span.k_rows,
                                                                                 span.total_k))
            if (r.start, r.stop) != (0, total)]
    raise ValueError(f"an fp8 recipe needs cu_seqlens covering every packed row (from 0 to the total), got "
                     f"{'; '.join(rows)}: pass the covered rows (q[cu_seqlens_q[0]:cu_seqlens_q[-1]], the same for "
                     "k and v, with cu_seqlens shifted to start at 0), or fp8=None")


def _kept_for_backward(quantized, kept: bool) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """fwd_fp8's last four outputs from a QuantizedQKV or FP8Operands: q8, k8 (their e4m3 bits as uint8: a float8
    output has no sum, which torch.library.opcheck takes of every output) and their descales (contiguous: with
    per-tensor scales the PyTorch pass's are expanded views), or empty tensors when the backward does not read them."""
    if not kept:
        return fp8_backward.empty_quantized(quantized.q, quantized.k, 0, 0, None, None, 0, 0, False)
    return (quantized.q.view(torch.uint8), quantized.k.view(torch.uint8), quantized.q_descale.contiguous(),
            quantized.k_descale.contiguous())


def _fp8_emulation(quantized, params: AttnParams, call: AttnCall, block_k: int, keys: int, cu_seqlens_q,
                   cu_seqlens_k, out_dtype: torch.dtype, fast_exp2: bool) -> tuple[Tensor, Tensor]:
    """The emulated FP8 forward (fa3nn.fp8.reference) on quantized inputs: fast_exp2 as the native kernel would
    take it; calls it cannot serve (windows, softcap) go to Triton's exact exp2 on a GPU, so they are emulated exact
    here too."""
    native = fast_exp2 and hopper_fp8.shape_refusal(call, block_k, keys) is None
    out, lse = attention_fp8(quantized, params.softmax_scale, params.window, params.softcap, cu_seqlens_q,
                             cu_seqlens_k, out_dtype=out_dtype, linear_exp2_every=None if native else 0)
    return out.contiguous(), lse.to(saved_lse_dtype(out_dtype)).contiguous()


def _fp8_kernel(chosen: str, operands, params: AttnParams, varlen: Varlen | None, max_seqlen_q, max_seqlen_k,
                out_dtype: torch.dtype, fast_exp2: bool) -> tuple[Tensor, Tensor]:
    """FP8_FORWARD_PATHS[chosen]'s kernel on fa3nn.fp8.operands' FP8Operands (packed when `varlen`; dense calls
    pass their lengths as max_seqlen_q / max_seqlen_k)."""
    path = FP8_FORWARD_PATHS[chosen]
    options = {"softcap": params.softcap} if params.softcap > 0 else {}  # see fa3nn.dispatch.FP8Path
    if fast_exp2 and path.fast_exp2:
        options["fast_exp2"] = True
    if params.sm_margin and path.sm_margin:
        options["sm_margin"] = params.sm_margin
    if varlen is not None and path.varlen_deal:
        options["varlen_deal"] = varlen_deal_for(varlen, "auto")
    cu_seqlens_q, cu_seqlens_k = (None, None) if varlen is None else (varlen.cu_seqlens_q, varlen.cu_seqlens_k)
    out, lse = path.kernel(
        operands.q, operands.k, operands.vt, operands.q_descale, operands.k_descale, operands.v_descale,
        operands.block_q, operands.block_k, params.softmax_scale, params.window, cu_seqlens_q, cu_seqlens_k,
        max_seqlen_q, max_seqlen_k, out_dtype, vt_starts=operands.vt_starts, **options)
    return out, lse.to(saved_lse_dtype(out_dtype))


attention_forward_fp8 = torch.library.custom_op("fa3nn::fwd_fp8", _forward_fp8_impl, mutates_args=())


@attention_forward_fp8.register_fake
def _(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, window_left, window_right,
      softcap, deterministic, backend, block_q, block_k, rotation, tensor_scales, fast_exp2=False, sm_margin=0,
      backward_from_quantized=False):
    quantized = fp8_backward.empty_quantized(q, k, block_q, block_k, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                             max_seqlen_k, backward_from_quantized)
    return *_outputs_like(q, v, cu_seqlens_q is not None), q.new_empty(3, dtype=torch.float32), *(
        x.new_empty(x.shape) for x in quantized)


FP8_SM_MARGIN_INPUT = 18  # fa3nn::fwd_fp8's sm_margin, after fast_exp2
FP8_BLOCK_INPUTS = slice(13, 16)  # block_q, block_k, rotation
FP8_FROM_QUANTIZED_INPUT = 19  # backward_from_quantized, after sm_margin


def _setup_fwd_fp8(ctx, inputs, output):
    """fa3nn::fwd_fp8's: _setup_context's, without sinks, with its sm_margin; with backward_from_quantized its
    q8 and k8 stand in for q and k, and their descales and the rotation are saved after the eight."""
    ctx.mark_non_differentiable(*output[2:])  # amax, q8, k8 and the descales: no gradient flows into them
    sm_margin = _input(inputs, FP8_SM_MARGIN_INPUT, 0)
    ctx.from_quantized = bool(_input(inputs, FP8_FROM_QUANTIZED_INPUT, False))
    if not ctx.from_quantized:
        _setup_context(ctx, inputs, output, None, sm_margin)
        return
    q8, k8, q_descale, k_descale = output[3:7]
    block_q, block_k, rotation = inputs[FP8_BLOCK_INPUTS]
    ctx.blocks = (block_q, block_k)
    _setup_context(ctx, (q8, k8, *inputs[2:]), output, None, sm_margin, extra=(q_descale, k_descale, rotation))


def _backward_fp8(ctx, dout, dlse, *unused_grads, backward=attention_backward, saved=None):  # amax ... descales: none
    """fa3nn::fwd_fp8's backward: _backward's, or with backward_from_quantized fa3nn::bwd from q8 and k8 dequantized
    to v's dtype with the recipe's rotation undone (fa3nn.fp8.backward.restore). `backward`: fa3nn::bwd, or its
    implementation in eager mode (_EagerAttentionFP8)."""
    saved = ctx.saved_tensors if saved is None else saved
    if not ctx.from_quantized:
        return _gradients(backward, ctx, dout, dlse, saved[:8])
    q8, k8, v, out, lse, cu_seqlens_q, cu_seqlens_k, sinks, q_descale, k_descale, rotation = saved
    q8, k8 = q8.view(E4M3), k8.view(E4M3)
    max_seqlen_q, max_seqlen_k = ctx.scalars[:2]
    with autocast_off(dout.device):  # a caller's autocast must not change the dequantization's or the GEMM's dtypes
        q = fp8_backward.restore(q8, q_descale, ctx.blocks[0], cu_seqlens_q, max_seqlen_q, rotation, v.dtype)
        k = fp8_backward.restore(k8, k_descale, ctx.blocks[1], cu_seqlens_k, max_seqlen_k, rotation, v.dtype)
        return _gradients(backward, ctx, dout, dlse, (q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, sinks))


attention_forward_fp8.register_autograd(_backward_fp8, setup_context=_setup_fwd_fp8)

FP8_DOUBLE_BACKWARD_REFUSAL = (
    "fa3nn FP8 attention does not support double backward (differentiating gradients taken with create_graph=True, "
    "e.g. a gradient penalty): its backward is a kernel's, with no autograd history; use fp8=None with "
    "backend='reference' for that"
)


class _EagerAttentionFP8(torch.autograd.Function):
    """fa3nn::fwd_fp8 and its backward without the custom-op dispatcher, for eager mode (as _EagerAttention): the
    dispatch (argument normalization, redispatch, the generated autograd wrapper) was ~30% of the FP8 op's host time
    in a training step (cProfile, s48d), and the FP8 step is host-bound at 2k tokens per sequence (s48b). Same
    functions, saved tensors and gradients; a double backward raises FP8_DOUBLE_BACKWARD_REFUSAL (the op's raised
    torch's 'no autograd formula' for fa3nn::bwd)."""

    @staticmethod
    def forward(ctx, q, k, v, *arguments):  # arguments: fa3nn::fwd_fp8's, after v
        output = _forward_fp8_impl(q, k, v, *arguments)
        _setup_fwd_fp8(ctx, (q, k, v, *arguments), output)
        return output

    @staticmethod
    def backward(ctx, dout, dlse, *unused_grads):
        saved = ctx.saved_tensors  # once: non-reentrant checkpoint refuses a second unpack (create_graph=True did)
        if not torch.is_grad_enabled():
            return _backward_fp8(ctx, dout, dlse, backward=_backward_impl, saved=saved)
        with torch.no_grad():  # grad mode: create_graph=True
            gradients = _backward_fp8(ctx, dout, dlse, backward=_backward_impl, saved=saved)
        q, k, v = saved[:3]
        return _OnceDifferentiable.apply(FP8_DOUBLE_BACKWARD_REFUSAL, len(gradients), *gradients, q, k, v, None, dout,
                                         dlse)


def attention_call_fp8(q, k, v, *arguments) -> tuple[Tensor, ...]:
    """fa3nn::fwd_fp8 with its autograd: the registered custom op where torch.compile traces, the same
    implementation through _EagerAttentionFP8 in eager mode. arguments: fa3nn::fwd_fp8's after v."""
    if torch.compiler.is_compiling() or _holds_no_values(q):
        return attention_forward_fp8(q, k, v, *arguments)
    return _EagerAttentionFP8.apply(q, k, v, *arguments)


@torch.library.custom_op("fa3nn::fwd_fp8_inputs", mutates_args=())
def attention_forward_fp8_inputs(
    q8: Tensor,
    k8: Tensor,
    v8: Tensor,
    q_descale: Optional[Tensor],
    k_descale: Optional[Tensor],
    v_descale: Optional[Tensor],
    cu_seqlens_q: Optional[Tensor],
    cu_seqlens_k: Optional[Tensor],
    max_seqlen_q: int,
    max_seqlen_k: int,
    softmax_scale: float,
    window_left: int,
    window_right: int,
    softcap: float,
    backend: str,
    sm_margin: int = 0,
) -> tuple[Tensor, Tensor]:
    """The FP8 forward on the caller's e4m3 q8, k8, v8 and (batch, nheads_kv) descales (fa3nn.fp8.inputs):
    out bfloat16, lse float32. No autograd (fa3nn.fp8.inputs.check_fp8_inputs refuses inputs that want one)."""
    with autocast_off(q8.device):  # (fa3nn.autocast)
        params = _params(softmax_scale, window_left, window_right, softcap, False, sm_margin)
        varlen = _varlen(q8, k8, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
        descales = (q_descale, k_descale, v_descale)
        span = RowSpan.of(varlen, q8.shape[0], k8.shape[0])
        if span is None:
            return _fp8_inputs_rows(q8, k8, v8, descales, params, varlen, max_seqlen_q, max_seqlen_k, backend)
        out, lse = _fp8_inputs_rows(span.q(q8), span.k(k8), span.k(v8), descales, params, span.inner(varlen),
                                    max_seqlen_q, max_seqlen_k, backend)
        return span.spread_q(out), span.spread_lse(lse)


def _fp8_inputs_rows(q8, k8, v8, descales, params: AttnParams, varlen: Varlen | None, max_seqlen_q: int,
                     max_seqlen_k: int, backend: str) -> tuple[Tensor, Tensor]:
    """fa3nn::fwd_fp8_inputs' work on rows that every sequence covers."""
    call = dataclasses.replace(AttnCall.of(q8, k8, v8, params, varlen is not None), dtype=fp8_inputs.OUT_DTYPE)
    keys = max_seqlen_k if varlen is not None else k8.shape[1]
    chosen = resolve_fp8(backend, call, 0, keys)  # one descale tile per sequence: block_k 0
    note_sm_margin(params.sm_margin, FP8_FORWARD_PATHS[chosen].sm_margin, FP8_FORWARD_PATHS[chosen].description)
    if q8.numel() == 0 or k8.numel() == 0:
        return _nothing_attended(q8, v8, varlen is not None, fp8_inputs.OUT_DTYPE)
    batch = varlen.batch if varlen is not None else q8.shape[0]
    rows_q = max_seqlen_q if varlen is not None else q8.shape[1]
    quantized = fp8_inputs.quantized_inputs(q8, k8, v8, *descales, batch, rows_q, keys)
    cu_seqlens_q, cu_seqlens_k = (None, None) if varlen is None else (varlen.cu_seqlens_q, varlen.cu_seqlens_k)
    if FP8_FORWARD_PATHS[chosen].kernel is None:
        return _fp8_emulation(quantized, params, call, 0, keys, cu_seqlens_q, cu_seqlens_k, fp8_inputs.OUT_DTYPE,
                              False)
    return _fp8_kernel(chosen, to_operands(quantized, cu_seqlens_k), params, varlen, rows_q, keys,
                       fp8_inputs.OUT_DTYPE, False)


@attention_forward_fp8_inputs.register_fake
def _(q8, k8, v8, q_descale, k_descale, v_descale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
      softmax_scale, window_left, window_right, softcap, backend, sm_margin=0):
    return _outputs_like(q8, v8, cu_seqlens_q is not None, fp8_inputs.OUT_DTYPE)
