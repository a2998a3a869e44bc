"""Values derived from a tensor's contents, remembered by the tensor's identity.

Reading a device tensor's values is a host sync. A training step hands the same boundary tensors (cu_seqlens,
position_ids, a padding mask) to every layer and to every backward, so fa3nn reads each one once per tensor, not per
call: 12-24 syncs per step become one, which matters most where the CPU must run ahead of the GPU (FSDP2's
prefetching all-gathers). The weakref and the version counter make a dead tensor, a new tensor at a recycled id, or
an in-place change through torch ops (t[1] = 4, t.add_(1), t.copy_(...)) miss and recompute.

The limitation: an edit that bypasses torch's version counter is not seen, and the remembered value is used as if the
tensor still held the old contents (stale sequence boundaries: a silently wrong result, or a bad value accepted).
Such edits are writes through memory the tensor shares: a numpy array of torch.from_numpy(array) or t.numpy(), writes
to t.data or t.detach() (their own counters), a DLPack or __cuda_array_interface__ consumer (CuPy, JAX), a kernel of
your own. To change boundaries, pass a new tensor, or edit this one with torch ops. A memo made with
remember_cpu=False (the cu_seqlens / seqused checks: fa3nn.checks, fa3nn.slots) computes afresh for every CPU
tensor, where reading is cheap (no device sync), so only device tensors carry the limitation there.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from typing import Any

import torch


class TensorMemo:
    """memo.get(tensor, key, compute) = compute(), remembered for (this tensor object, its version, key);
    remember_cpu=False: for device tensors only (a CPU tensor's is computed at every call)."""

    def __init__(self, max_entries: int = 256, remember_cpu: bool = True):
        self.max_entries = max_entries
        self.remember_cpu = remember_cpu
        self._entries: dict[int, tuple] = {}

    def get(self, tensor: torch.Tensor, key: Hashable, compute: Callable[[], Any]) -> Any:
        # Under torch.compile the lookup runs eagerly, never traced: traced, dynamo guarded on id(tensor) and
        # recompiled for every new tensor (each training step's position_ids) until its recompile limit (8), then
        # warned and ran it eagerly (llama-1b with model.compile=true on the H200, 2026-12-01). The disabled copy is
        # made only while compiling: torch.compiler.disable imports dynamo (and with it triton), which `import fa3nn`
        # must not (as a decorator it broke the Triton interpreter tests, which set TRITON_INTERPRET before
        # triton's first import).
        if torch.compiler.is_compiling():
            return torch.compiler.disable(TensorMemo._lookup)(self, tensor, key, compute)
        return self._lookup(tensor, key, compute)

    def _lookup(self, tensor: torch.Tensor, key: Hashable, compute: Callable[[], Any]) -> Any:
        if not self.remember_cpu and tensor.device.type == "cpu":  # no sync to save, no stale value to risk
            return compute()
        try:
            version = tensor._version
        except RuntimeError:  # inference-mode tensors have no version counter: nothing can be remembered safely
            return compute()
        entry = self._entries.get(id(tensor))
        if entry is not None and entry[0]() is tensor and entry[1] == version and entry[2] == key:
            return entry[3]
        value = compute()
        if len(self._entries) >= self.max_entries:
            self._entries.clear()
        self._entries[id(tensor)] = (weakref.ref(tensor), version, key, value)
        return value

