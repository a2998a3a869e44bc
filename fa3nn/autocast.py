"""torch.autocast and fa3nn's attention.

The public functions and the module take q, k, v (and qv) in the autocast dtype (`to_autocast_dtype`), as torch's
scaled_dot_product_attention does (it is on autocast's lower-precision list on the CPU and on CUDA). A custom op is
invisible to autocast, so before, float32 inputs under `torch.autocast("cuda", torch.bfloat16)` ran in float32,
which no GPU kernel here takes (`auto` fell back to the slow reference; on the CPU, float32 out under a bf16
autocast), and a bf16 q from an autocast Linear with float32 k, v (a cache, float32 rotary) raised "must share one
dtype" where SDPA runs. The cast is autocast's own rule: float32, float16 and bfloat16 tensors take the autocast
dtype, float64 and FP8 ones stay; it is an ordinary differentiable cast, so each input's gradient comes back in its
own dtype, as through any autocast op.

The ops run their implementations with autocast off (`autocast_off`): a backend picks its own precision, and the
reference computes one step wider than its inputs (fa3nn.backends.reference). Under a user's
`torch.autocast("cpu", torch.bfloat16)` its float32 matmuls had been cast to bf16 too: bf16 inputs' output error
against float64 grew from 9.7e-4 to 1.13e-2 (batch 2, seqlen 512, 4 heads, head dim 64), silently.
"""

from __future__ import annotations

import contextlib

import torch

_CAST_DTYPES = (torch.float32, torch.float16, torch.bfloat16)  # what autocast casts (never float64, never FP8)
# Devices with an autocast (torch.is_autocast_enabled raises for others, e.g. meta). A fixed list, not
# torch.amp.is_autocast_available: torch 2.11's Dynamo cannot trace that one, so it failed every fullgraph compile.
_AUTOCAST_DEVICE_TYPES = ("cpu", "cuda", "xpu", "mps", "hpu", "xla", "mtia", "maia", "privateuseone")


def autocast_dtype(device: torch.device) -> torch.dtype | None:
    """The dtype torch.autocast asks of lower-precision ops on `device`; None outside autocast (or on a device
    without autocast, e.g. meta)."""
    device_type = device.type
    if device_type in _AUTOCAST_DEVICE_TYPES and torch.is_autocast_enabled(device_type):
        return torch.get_autocast_dtype(device_type)
    return None


def dtype_under_autocast(dtype: torch.dtype, device: torch.device) -> torch.dtype:
    """The dtype a tensor of `dtype` on `device` takes under the current autocast (to_autocast_dtype's rule)."""
    cast = autocast_dtype(device)
    return cast if cast is not None and dtype in _CAST_DTYPES else dtype


def to_autocast_dtype(*tensors: torch.Tensor | None) -> tuple[torch.Tensor | None, ...]:
    """`tensors` (None passed through) cast to the autocast dtype of the first one's device under autocast, as they
    are outside it."""
    first = next((t for t in tensors if isinstance(t, torch.Tensor)), None)
    dtype = None if first is None else autocast_dtype(first.device)
    if dtype is None:
        return tensors
    return tuple(t.to(dtype) if isinstance(t, torch.Tensor) and t.dtype in _CAST_DTYPES else t for t in tensors)


def autocast_off(device: torch.device):
    """A context in which autocast is off on `device` (a no-op context where it is off already, or where the device
    has no autocast, e.g. meta)."""
    return contextlib.nullcontext() if autocast_dtype(device) is None else torch.autocast(device.type, enabled=False)

