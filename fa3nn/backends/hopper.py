"""The native Hopper (sm_90a) backend: the warp-specialized wgmma + TMA kernels from kernels/hopper/.

Forward: bf16/fp16, head dims 64/128/256, causal or not, sliding windows, softcap, MQA/GQA, varlen; and DeepSeek's
multi-head latent attention (q/k 192, v 128: causal or not, MQA/GQA, varlen, sinks; no windows or softcap, either
way: hopper_bwd.HEADDIM_PAIRS / PLAIN_ONLY_HEADDIMS, the one table of head dims). Backward
(hopper_bwd.py): dense and varlen batches, head dims 64/128/256 and 192 / 128, causal or not, MHA and GQA/MQA (the
kernel walks each K/V head's query heads while hopper_bwd.NATIVE_GQA is on, else K/V are expanded and dK/dV summed
over each group),
with or without a gradient into lse, sliding windows, softcap; deterministic=True (dQ is summed with fp32 atomics)
is refused, so `auto` runs it on triton (else reference), which read the same lse: float32
natural log, (batch, nheads, seqlen_q), or (nheads, total_q) for varlen. The library is loaded (built on first use,
see hopper_build) the first time a call that this backend could otherwise serve asks, and a failed load becomes the
refusal reason, so `auto` falls through.
"""

from __future__ import annotations

import ctypes

import torch

from fa3nn.backends import hopper_bwd
from fa3nn.backends.base import AttnCall, AttnParams, Backend, Varlen
from fa3nn.backends.hopper_lib import LIBRARY, max_ctas_leaving, tma_ready
from fa3nn.backends.reference import ReferenceBackend
from fa3nn.checks import check_native_softcap
from fa3nn.sinks import check_sinks

SUPPORTED_DTYPES = (torch.bfloat16, torch.float16)
# Head dims whose softcap forward auto takes natively. H200, cap 30, s31h: d128 causal 1.11-1.17x Triton and windows
# (1024, 0) / (4096, 0) 0.92-1.08x, d256 1.03-1.26x. The library has d64's too (tested): with softcap_tanh (two MUFU
# ops beside the softmax's exp2) it ran at 0.88-0.93x Triton (s31h); with tanh_poly on the FMA pipe (d64 only,
# softmax.cuh tanh_poly_pays; s33b) causal 1.04-1.11x, windows 0.93-1.02x, non-causal unmeasured: not a clear win, so
# auto keeps Triton's d64 forward.
SOFTCAP_HEADDIMS = (128, 256)
# Head dims whose softcap backward auto takes natively (independent of the forward's: the native backward recomputes
# P from any forward's lse with a tanh that agrees with the Triton kernels' to ~2e-7). H200, cap 30, bf16, s33a:
# native x Triton 1.22-1.43 (d64), 1.40-1.52 (d128), 1.51-1.54 (d256) on windows (1024, 0) / (4096, 0) at 4k / 16k;
# causal 1.34-1.70.
SOFTCAP_BWD_HEADDIMS = (64, 128, 256)

# Variants of the kernel, for benchmarks only: ablations (bf16, non-causal), other tile shapes (bf16; `Tiles` in
# kernels/hopper/flash_fwd_launch.cuh), the default kernels with the causal deal before 2026-12-01 (l2_sections) or
# with O rescaled on every rise of a row maximum (eager_rescale), and a diagnostic that skips the K/V loads (head dim
# 128; wrong results: it measures the kernel without its L2 -> shared-memory traffic), and the default dispatch
# with each row's max from 3-input integer maxes on the score bits (int_max; d128's default) or from the float tree
# (float_max; d64's and d256's) at every head dim (bf16; the same maxima either way); one_section: the default
# kernels with one longest-first causal section over every tile at any length (Problem::causal_deal 2). Head dims
# 192 / 128 (kernels/hopper/flash_fwd_d192.cu) build full, tiles_a (128 x 96), tiles_b (128 x 128), int_max (the
# default) and float_max (128 x 128 with the float tree) only.
VARIANTS = {
    "full": 0, "no_pingpong": 1, "no_overlap": 2, "no_pingpong_no_overlap": 3, "tiles_a": 4, "tiles_b": 5,
    "no_cross_tile": 6, "l2_sections": 7, "eager_rescale": 8, "skip_kv_loads": 9, "int_max": 10, "float_max": 11,
    "one_section": 12,
}


def launch(
    q, k, v, softmax_scale: float, causal: bool, varlen: Varlen | None = None, variant: str = "full", out=None,
    lse=None, library: ctypes.CDLL | None = None, window_size: tuple[int, int] = (-1, -1), softcap: float = 0.0,
    sinks: torch.Tensor | None = None, sm_margin: int = 0, varlen_deal: str = "auto",
):
    """Run the kernel; returns (out, lse). Allocates through torch (unless `out`/`lse` are given: tests pass
    NaN-poisoned ones), launches on the current stream, never syncs. `library` (a hopper_build.load() result) runs
    another build of the kernels instead of the backend's own: benchmarks compare versions in one run.
    `window_size` (left, right), -1 unbounded, with `causal` as in fa3nn.masks.Window.from_args: a window other than
    full or causal runs the window kernels (variant "full" only); `softcap` > 0 the softcap kernels
    (softmax(softcap * tanh(scores * softmax_scale / softcap)), variant "full" only). `sinks` (nheads,): gpt-oss's
    per-head sink logits, applied in the kernel's epilogue (fa3nn.sinks: out and lse of the softmax with the sink).
    `sm_margin`: SMs left free for overlapping kernels (hopper_lib.max_ctas_leaving; the launch is persistent, so
    at most the others run attention). `varlen_deal`: how a varlen call's tiles reach the CTAs, "dynamic" (each CTA
    takes its next tile from a counter as it finishes one), "static" (CTA i takes tiles i, i + grid, ...) or "auto"
    (varlen_deal_for: dynamic but where every sequence has one length); dense calls are always dealt statically."""
    deal = varlen_deal_for(varlen, varlen_deal)
    window = hopper_bwd.window_of(causal, window_size)
    if window.sliding and variant != "full":
        raise ValueError(f"window_size {window_size}: the sliding-window forward is built for variant 'full' only, "
                         f"got variant={variant!r}")
    check_native_softcap(softcap, softmax_scale)
    if softcap > 0 and variant != "full":
        raise ValueError(f"softcap {softcap}: the softcap forward is built for variant 'full' only, got "
                         f"variant={variant!r}")
    if isinstance(q, torch.Tensor) and isinstance(v, torch.Tensor):
        hopper_bwd.check_plain_only(q.shape[-1], v.shape[-1], window, window_size, softcap, "forward")
    lib = library if library is not None else LIBRARY.require()
    max_ctas = max_ctas_leaving(sm_margin, q.device)
    q, k, v = tma_ready(q), tma_ready(k), tma_ready(v)
    if sinks is not None:
        check_sinks(sinks, q.shape[-2], q.device)
        sinks = sinks.detach().to(torch.float32).contiguous()
    headdim, headdim_v = q.shape[-1], v.shape[-1]
    if out is None:
        out = torch.empty(*q.shape[:-1], v.shape[-1], dtype=q.dtype, device=q.device)
    if varlen is None:
        batch, seqlen_q, nheads, _ = q.shape
        seqlen_k, nheads_kv = k.shape[1], k.shape[2]
        max_seqlen_q = seqlen_q
        if lse is None:
            lse = torch.empty(batch, nheads, seqlen_q, dtype=torch.float32, device=q.device)
        strides = [s for t in (q, k, v, out) for s in t.stride()[:3]]
        cu_q = cu_k = None
    else:
        seqlen_q, nheads, _ = q.shape
        seqlen_k, nheads_kv = k.shape[0], k.shape[1]
        batch, max_seqlen_q = varlen.batch, varlen.max_seqlen_q
        if lse is None:
            lse = torch.empty(nheads, seqlen_q, dtype=torch.float32, device=q.device)
        strides = [s for t in (q, k, v, out) for s in (0, *t.stride()[:2])]
        cu_q = varlen.cu_seqlens_q.to(torch.int32).contiguous()
        cu_k = varlen.cu_seqlens_k.to(torch.int32).contiguous()
    # The dynamic deal's counter (zeroed by the library on the stream): one per call, so that calls on other streams
    # never share one.
    counter = torch.empty(1, dtype=torch.int32, device=q.device) if deal == "dynamic" else None
    stride_array = (ctypes.c_int64 * 12)(*strides)
    with torch.cuda.device(q.device):
        stream = torch.cuda.current_stream(q.device).cuda_stream
        status = lib.fa3nn_hopper_fwd(
            q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), lse.data_ptr(),
            None if cu_q is None else cu_q.data_ptr(), None if cu_k is None else cu_k.data_ptr(),
            batch, seqlen_q, seqlen_k, max_seqlen_q, nheads, nheads_kv, headdim, headdim_v, stride_array,
            float(softmax_scale), int(causal), *window.kernel_sides(seqlen_q, seqlen_k), float(softcap),
            None if sinks is None else sinks.data_ptr(), int(q.dtype == torch.bfloat16), VARIANTS[variant], max_ctas,
            None if counter is None else counter.data_ptr(), stream,
        )
    if status != 0:
        raise RuntimeError(f"fa3nn hopper forward failed: {lib.fa3nn_hopper_last_error().decode()}")
    return out, lse


# How a varlen forward deals its tiles (launch's varlen_deal). The static deal gives CTA i tiles i, i + grid, ...
# whatever their lengths, so on packed sequences of mixed lengths some CTAs draw more of the long tiles; the dynamic
# deal (FwdConfig::kDynamic) hands each CTA its next tile as it finishes one. Measured on the H100 (s46b,
# scripts/fwd_varlen_balance.py, 16384 tokens, dynamic x static): lengths drawn from [256, 4096] 1.06-1.30x, from
# [32, 1024] 1.17-1.45x at d64 / d128 / d256, causal and not; but with every sequence 2048 long 0.89-0.98x causal (the
# static deal's boustrophedon over one (sequence, head) pair per section is balanced there, as for the dense call)
# and 0.97-1.01x non-causal. So auto deals dynamically unless every sequence has one length.
VARLEN_DEALS = ("auto", "dynamic", "static")


def varlen_deal_for(varlen: Varlen | None, requested: str) -> str | None:
    """The deal a forward call runs: None for a dense call; for a varlen call `requested` ("dynamic" or "static"),
    or for "auto" static where every sequence has one query and one key length (hopper_bwd.uniform_lengths), else
    dynamic (VARLEN_DEALS says why)."""
    if requested not in VARLEN_DEALS:
        raise ValueError(f"varlen_deal must be one of {VARLEN_DEALS}, got {requested!r}")
    if varlen is None:
        return None
    if requested == "auto":
        return "static" if hopper_bwd.uniform_lengths(varlen) else "dynamic"
    return requested


class HopperBackend(Backend):
    name = "hopper"
    honours_sm_margin = True

    def refusal(self, call: AttnCall, backward: bool) -> str | None:
        if call.device_type != "cuda":
            return f"needs a CUDA device, got {call.device_type}"
        if call.capability != (9, 0):
            return f"needs a Hopper GPU (sm_90), got sm_{call.capability[0]}{call.capability[1]}"
        if call.dtype not in SUPPORTED_DTYPES:
            return f"dtype {call.dtype} is not supported (bfloat16, float16); fp8 has its own path"
        dims = (call.headdim, call.headdim_v)
        if dims not in hopper_bwd.HEADDIM_PAIRS:
            return (
                f"headdim {call.headdim}/{call.headdim_v} is not supported by the hopper backend (q/k / v: "
                f"{', '.join(f'{d}/{dv}' for d, dv in hopper_bwd.HEADDIM_PAIRS)}); use backend='triton'"
            )
        if dims in hopper_bwd.PLAIN_ONLY_HEADDIMS and (call.window.sliding or call.softcap > 0):
            return hopper_bwd.plain_only_refusal(call, "backward" if backward else "forward") + "; use backend='triton'"
        if call.softcap > 0 and backward and call.headdim not in SOFTCAP_BWD_HEADDIMS:
            return (f"softcap at head dim {call.headdim}: the native softcap backward serves head dims "
                    f"{', '.join(map(str, SOFTCAP_BWD_HEADDIMS))}")
        if call.softcap > 0 and not backward and call.headdim not in SOFTCAP_HEADDIMS:
            return (f"softcap at head dim {call.headdim}: the Triton forward is as fast there (native 0.93-1.11x); "
                    f"the native softcap forward serves head dims {', '.join(map(str, SOFTCAP_HEADDIMS))}")
        if call.nheads % call.nheads_kv != 0:
            return "nheads must be a multiple of nheads_kv"
        if backward and (why := hopper_bwd.refusal(call)) is not None:
            return why
        if LIBRARY.get() is None:
            return LIBRARY.error
        return None

    def forward(self, q, k, v, params: AttnParams, varlen: Varlen | None, sinks=None):
        if not params.softmax_scale > 0:
            # The kernel's running maximum assumes scores grow with Q K^T (a positive scale); a zero or negative
            # scale is legal but degenerate, so it takes the exact path instead of a wrong one.
            return ReferenceBackend().forward(q, k, v, params, varlen, sinks)
        return launch(q, k, v, params.softmax_scale, params.window.causal, varlen,
                      window_size=(params.window.left, params.window.right), softcap=params.softcap, sinks=sinks,
                      sm_margin=params.sm_margin)

    def backward(self, dout, q, k, v, out, lse, dlse, params, varlen):
        if not params.softmax_scale > 0:  # as in forward: the degenerate scale takes the exact path
            return ReferenceBackend().backward(dout, q, k, v, out, lse, dlse, params, varlen)
        return hopper_bwd.backward(dout, q, k, v, out, lse, dlse, params, varlen)

    def backward_with_sinks(self, dout, q, k, v, out, lse, dlse, params, varlen, sinks):
        """The sinks' gradient from the preprocess's rowsum(dout * out) (sinks_gradient_of_delta): H100, s37a,
        the generic pass cost 0.14-0.26 ms per call (fwd + bwd with sinks 1.02-1.12x the plain call causal, 1.21-1.31x
        with window 128)."""
        if not params.softmax_scale > 0:
            return ReferenceBackend().backward_with_sinks(dout, q, k, v, out, lse, dlse, params, varlen, sinks)
        return hopper_bwd.backward(dout, q, k, v, out, lse, dlse, params, varlen, sinks)
