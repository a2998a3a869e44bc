"""torch.autocast and fa3nn's attention.

The ops run their implementations with autocast off (`autocast_off`): a backend picks its own precision, and the
reference computes one step wider than its inputs (fa3nn.backends.reference). Under a user's
`torch.autocast("cpu", torch.bfloat16)` its float32 matmuls had been cast to bf16 too: bf16 inputs' output error
against float64 grew from 9.7e-4 to 1.13e-2 (batch 2, seqlen 512, 4 heads, head dim 64), silently.
"""

from __future__ import annotations

import contextlib

import torch


def autocast_off(device: torch.device):
    """A context in which autocast is off on `device` (a no-op context where it is off already, or where the device
    has no autocast, e.g. meta)."""
    device_type = device.type
    if torch.amp.is_autocast_available(device_type) and torch.is_autocast_enabled(device_type):
        return torch.autocast(device_type, enabled=False)
    return contextlib.nullcontext()

