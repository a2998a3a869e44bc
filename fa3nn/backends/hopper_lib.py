"""What every native Hopper binding shares: the shared library (kernels/hopper/, loaded once, built on first use by
hopper_build) and the operand rule of TMA, imported by the forward (hopper.py), backward (hopper_bwd.py) and FP8
forward (hopper_fp8.py) bindings so that none reaches into another's internals.
"""

from __future__ import annotations

import ctypes
import threading

import torch


class _Library:
    """Loads the shared library once; remembers why it could not."""

    def __init__(self) -> None:
        self.lib: ctypes.CDLL | None = None
        self.error: str | None = None
        self.tried = False
        self.lock = threading.Lock()

    def get(self) -> ctypes.CDLL | None:
        with self.lock:
            if self.tried:
                return self.lib
            self.tried = True
            try:
                from fa3nn.backends import hopper_build  # lazy: `python -m fa3nn.backends.hopper_build` stays clean

                self.lib = hopper_build.load(hopper_build.library_path())
            except Exception as exc:  # noqa: BLE001 - the reason becomes the refusal message
                self.error = f"native library unavailable: {exc}"
            return self.lib

    def require(self) -> ctypes.CDLL:
        lib = self.get()
        if lib is None:
            raise RuntimeError(self.error)
        return lib


LIBRARY = _Library()


def tma_ready(t: torch.Tensor) -> torch.Tensor:
    """TMA reads a contiguous last dim from a 16-B aligned base with byte strides that are multiples of 16; a tensor
    that breaks the rule is copied (contiguous, and to a fresh buffer if the contiguous view sits at an odd offset)."""
    size = t.element_size()
    if t.stride(-1) == 1 and t.data_ptr() % 16 == 0 and all(s * size % 16 == 0 for s in t.stride()[:-1]):
        return t
    t = t.contiguous()
    return t if t.data_ptr() % 16 == 0 else t.clone()


def max_ctas_leaving(sm_margin: int, device: torch.device) -> int:
    """The CTA cap of the persistent launches (the C ABI's max_ctas) that leaves `sm_margin` of `device`'s SMs to
    kernels overlapping attention (FlashAttention-3's sm_margin): 0 (one CTA per SM) without a margin, else SMs minus
    the margin. Each CTA runs on one SM, so at most that many SMs are busy with attention."""
    if isinstance(sm_margin, bool) or not isinstance(sm_margin, int):
        raise TypeError(f"sm_margin must be an int (SMs to leave free), got {type(sm_margin).__name__} {sm_margin!r}")
    if sm_margin == 0:
        return 0
    if torch.device(device).type != "cuda":
        raise ValueError(f"sm_margin leaves SMs of a CUDA device free; the tensors are on {device}")
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    if not 0 < sm_margin < sms:
        raise ValueError(f"sm_margin must leave at least one of the device's {sms} SMs to attention (0 <= sm_margin < "
                         f"{sms}), got {sm_margin}")
    return sms - sm_margin
