"""Slot for the native Hopper (sm_90a) backend: warp-specialized wgmma + TMA kernels from kernels/hopper/.

Not built yet (the native Hopper forward issue). Until then it refuses every call, so `auto` never picks it and
forcing it raises an error that says so; it does not pretend to work.
"""

from __future__ import annotations

from fa3nn.backends.base import AttnCall, Backend


class HopperBackend(Backend):
    name = "hopper"

    def refusal(self, call: AttnCall, backward: bool) -> str | None:
        return "not implemented yet (native Hopper kernels are tracked in their own issue)"
