"""Slot for the portable Triton backend (sm_80 and newer).

Not built yet (the Triton backend issue). Until then it refuses every call, so `auto` never picks it and forcing
it raises an error that says so; it does not pretend to work.
"""

from __future__ import annotations

from fa3nn.backends.base import AttnCall, Backend


class TritonBackend(Backend):
    name = "triton"

    def refusal(self, call: AttnCall, backward: bool) -> str | None:
        return "not implemented yet (the Triton kernels are tracked in their own issue)"
