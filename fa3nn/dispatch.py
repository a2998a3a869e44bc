"""One dispatch in front of every backend.

`backend="auto"` tries, in order, hopper (native sm_90a kernels), triton (any sm_80+ GPU), reference (pure PyTorch,
any device) and takes the first that supports the exact call: device, dtype, head dims, features, direction.
The reference backend supports everything, so `auto` always finds one; on a CUDA device it is a slow path and
`auto` warns once when it lands there. Forcing a backend that can't serve a call raises `UnsupportedCall` naming
what is unsupported and which backends would work.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

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
        if reason is not None:
            able = [name for name, why in refusals(call, backward).items() if why is None]
            raise UnsupportedCall(
                f"backend={backend!r} cannot run this {direction} call: {reason}. "
                f"Backends that can: {able}; or pass backend='auto'"
            )
        return BACKENDS[backend]
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


def explain_call(backend: str, call: AttnCall) -> Explanation:
    check_backend_name(backend)
    picks, refused = {}, {}
    for backward in (False, True):
        answers = refusals(call, backward)
        if backend == "auto":
            picks[backward] = next(name for name, why in answers.items() if why is None)
        else:
            picks[backward] = backend if answers[backend] is None else "none"
        refused[backward] = {name: why for name, why in answers.items() if why is not None}
    return Explanation(picks[False], picks[True], refused[False], refused[True])
