"""One dispatch in front of every backend.

`backend="auto"` tries, in order, hopper (native sm_90a kernels), triton (any sm_80+ GPU), reference (pure PyTorch,
any device) and takes the first that supports the exact call: device, dtype, head dims, features, direction.
The reference backend supports everything, so `auto` always finds one; on a CUDA device it is a slow path and
`auto` warns once when it lands there. Forcing a backend that can't serve a call's forward raises `UnsupportedCall`
naming what is unsupported and which backends would work; the backward of a forced backend that cannot run it
(the native Hopper backward lacks deterministic=True) runs where `auto` would run it.

FP8 calls (an `fp8=` recipe) have their own forward paths, `FP8_FORWARD_PATHS`; their backward is the bf16 backward
and is dispatched as above. `auto` takes the first FP8 path in AUTO_ORDER (hopper > triton > reference) that serves
the call: the native FP8 kernel on Hopper (dense or varlen batches, no window or softcap, K/V scale tiles of whole
128-key blocks, or 256- or 192-key ones at head dim 128), the Triton FP8 kernel on sm_89+ GPUs, else the emulation
of the kernels' rounding points (slow, any device). Forcing a backend without an FP8 path raises rather than
silently running bf16.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

from fa3nn.backends import hopper_fp8
from fa3nn.backends.base import AttnCall, Backend
from fa3nn.backends.hopper import HopperBackend
from fa3nn.backends.reference import ReferenceBackend
from fa3nn.backends.triton import TritonBackend

BACKENDS: dict[str, Backend] = {b.name: b for b in (HopperBackend(), TritonBackend(), ReferenceBackend())}
AUTO_ORDER: tuple[str, ...] = tuple(BACKENDS)
BACKEND_CHOICES: tuple[str, ...] = ("auto", *AUTO_ORDER)


class UnsupportedCall(ValueError):
    """A forced backend cannot serve this call."""


def check_backend_name(backend: str) -> None:
    if backend not in BACKEND_CHOICES:
        raise ValueError(f"backend must be one of {BACKEND_CHOICES}, got {backend!r}")


def refusals(call: AttnCall, backward: bool) -> dict[str, str | None]:
    """Every backend's answer for this call: None if it can serve it, else why not."""
    return {name: BACKENDS[name].refusal(call, backward) for name in AUTO_ORDER}


_warned_slow_path: set[tuple] = set()


def resolve(backend: str, call: AttnCall, backward: bool = False) -> Backend:
    direction = "backward" if backward else "forward"
    if backend != "auto":
        check_backend_name(backend)
        reason = BACKENDS[backend].refusal(call, backward)
        if reason is None:
            return BACKENDS[backend]
        if not backward:
            able = [name for name, why in refusals(call, backward).items() if why is None]
            raise UnsupportedCall(
                f"backend={backend!r} cannot run this {direction} call: {reason}. "
                f"Backends that can: {able}; or pass backend='auto'"
            )
        # A forced backend picks the forward. A backward it cannot run (e.g. a varlen one on hopper)
        # takes auto's order, so training with a forced forward works; explain() shows where it runs.
    answers = refusals(call, backward)
    chosen = next(name for name, why in answers.items() if why is None)
    if chosen == "reference" and call.device_type == "cuda":
        key = (call.dtype, call.headdim, call.window, call.softcap > 0, call.varlen, backward)
        if key not in _warned_slow_path:
            _warned_slow_path.add(key)
            why = "; ".join(f"{n}: {r}" for n, r in answers.items() if r is not None)
            warnings.warn(
                f"fa3nn: backend='auto' fell back to the pure-PyTorch reference on CUDA for this {direction} "
                f"call (slow). Refused: {why}",
                stacklevel=3,
            )
    return BACKENDS[chosen]


@dataclass(frozen=True)
class FP8Path:
    """One FP8 forward. `refusal(call, block_k, max_seqlen_k)` is None when it serves the call, else why not
    (block_k: the recipe's key rows per K/V scale, 0 for one scale per sequence; max_seqlen_k: the longest key
    sequence). `kernel` is None for the
    emulation (fa3nn.fp8.reference, fed by the PyTorch quantization); otherwise fa3nn::fwd_fp8 runs the fused
    quantization pass (fa3nn.backends.triton.quantize) and calls

        kernel(q8, k8, vt8, q_descale, k_descale, v_descale, block_q, block_k, softmax_scale, window,
               cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, out_dtype, vt_starts=...[, softcap=...])
            -> (out, lse)

    on the operands of fa3nn.fp8.operands (dense calls pass cu_seqlens None, the dense lengths and vt_starts None;
    packed ones the int32 first Vᵀ column of each sequence, FP8Operands.vt_starts); softcap is passed only when
    nonzero, so a kernel without softcap refuses such calls and need not take the argument. fast_exp2: the kernel
    takes fast_exp2=True (the recipes' fast_exp2, passed only when set); a path without it runs the exact exp2.
    sm_margin: the kernel takes sm_margin=n (AttnParams.sm_margin, passed only when nonzero) and leaves that many SMs
    free; calls with a margin on a path without it are warned about once (fa3nn.fa3_compat.note_sm_margin).
    varlen_deal: the kernel takes varlen_deal="dynamic" | "static" (packed calls only; fa3nn.backends.hopper.
    varlen_deal_for's choice)."""

    description: str
    refusal: Callable[[AttnCall, int, int], str | None]
    kernel: Callable | None = None
    fast_exp2: bool = False
    sm_margin: bool = False
    varlen_deal: bool = False


def _serves_all(call: AttnCall, block_k: int, max_seqlen_k: int) -> str | None:
    return None


# FP8 forward paths by backend name. A new FP8 kernel is one entry here (its name must be a backend's, so that
# `backend=` can force it; AUTO_ORDER ranks it).
FP8_FORWARD_PATHS: dict[str, FP8Path] = {
    "hopper": FP8Path("hopper fp8 kernel", hopper_fp8.refusal, hopper_fp8.fp8_forward, fast_exp2=True,
                      sm_margin=True, varlen_deal=True),
    "triton": FP8Path("triton fp8 kernel", lambda call, block_k, max_seqlen_k: BACKENDS["triton"].fp8_refusal(call),
                      BACKENDS["triton"].forward_fp8),
    "reference": FP8Path("fp8 emulation (reference)", _serves_all),
}


def fp8_refusal(name: str, call: AttnCall, block_k: int, max_seqlen_k: int) -> str | None:
    if name not in FP8_FORWARD_PATHS:
        return f"the {name} backend has no FP8 forward kernel yet (FP8 runs through another path until it lands)"
    return FP8_FORWARD_PATHS[name].refusal(call, block_k, max_seqlen_k)


def resolve_fp8(backend: str, call: AttnCall, block_k: int, max_seqlen_k: int) -> str:
    """The FP8 forward path for this call (a key of FP8_FORWARD_PATHS); raises UnsupportedCall for a forced
    backend that has none. block_k / max_seqlen_k as in FP8Path."""
    check_backend_name(backend)
    answers = {name: fp8_refusal(name, call, block_k, max_seqlen_k) for name in AUTO_ORDER}
    if backend == "auto":
        chosen = next(name for name, why in answers.items() if why is None)
        if chosen == "reference" and call.device_type == "cuda" and "fp8" not in _warned_slow_path:
            _warned_slow_path.add("fp8")
            why = "; ".join(f"{n}: {r}" for n, r in answers.items() if r is not None)
            warnings.warn(
                f"fa3nn: FP8 attention fell back to the emulation of the FP8 kernels' rounding (slow) on CUDA "
                f"(refused: {why}); pass fp8=None for the fast bf16 kernels",
                stacklevel=3,
            )
        return chosen
    if answers[backend] is not None:
        able = [name for name, why in answers.items() if why is None]
        raise UnsupportedCall(
            f"backend={backend!r} cannot run this FP8 forward call: {answers[backend]}. "
            f"Backends that can: {able}; or pass backend='auto' (or fp8=None for bf16)"
        )
    return backend


@dataclass(frozen=True)
class Explanation:
    """Which backend a call would use in each direction, and why every other backend was refused."""

    forward: str
    backward: str
    forward_refusals: dict[str, str]
    backward_refusals: dict[str, str]

    def __str__(self) -> str:
        lines = [f"forward: {self.forward}", f"backward: {self.backward}"]
        for direction, refused in (("forward", self.forward_refusals), ("backward", self.backward_refusals)):
            lines += [f"  {direction} refused by {name}: {why}" for name, why in refused.items()]
        return "\n".join(lines)


def explain_call(backend: str, call: AttnCall, fp8: bool = False, block_k: int = 0, max_seqlen_k: int = 0
                 ) -> Explanation:
    """With fp8, the forward names its FP8 path (e.g. "fp8 emulation (reference)"); the backward is the bf16 one.
    block_k / max_seqlen_k: the recipe's K/V scale rows and the longest key sequence, as in FP8Path."""
    check_backend_name(backend)
    picks, refused = {}, {}
    for backward in (False, True):
        answers = refusals(call, backward)
        if fp8 and not backward:
            answers = {name: fp8_refusal(name, call, block_k, max_seqlen_k) for name in AUTO_ORDER}
        auto_pick = next((name for name, why in answers.items() if why is None), "none")
        if backend == "auto" or (backward and answers[backend] is not None):  # see resolve(): backward falls back
            picks[backward] = auto_pick
        else:
            picks[backward] = backend if answers[backend] is None else "none"
        refused[backward] = {name: why for name, why in answers.items() if why is not None}
    if fp8 and picks[False] != "none":
        picks[False] = FP8_FORWARD_PATHS[picks[False]].description
    return Explanation(picks[False], picks[True], refused[False], refused[True])
