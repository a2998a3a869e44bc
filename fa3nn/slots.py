"""FlashAttention-3's sequences in fixed slots, as the packed (varlen) layout every fa3nn backend runs.

flash_attn_varlen_func takes, as FlashAttention-3's does, two more ways to say where sequences are:

- seqused_q / seqused_k, int32 (batch,): sequence i uses only the first seqused[i] rows of its slot (rows
  cu_seqlens[i] .. cu_seqlens[i + 1] of the packed tensor, or row i of a dense one); the rest of the slot is padding.
  Masks align bottom-right on the used lengths. Padding query rows get zeros and lse = -inf (FlashAttention-3 leaves
  them unwritten; with sinks, the head's sink logit, as every row that attends no key: fa3nn.sinks), and zero
  gradients; padding keys are never attended.
- cu_seqlens_q or cu_seqlens_k None: that side is dense, (batch, seqlen, nheads, headdim), every slot seqlen rows.
  The output and lse follow q's layout.

max_seqlen bounds the lengths attended, as FlashAttention-3 reads it: a given value must cover the used lengths (all
of a slot without seqused); a dense side's may be None. The packed call gets the exact longest of its sequences.

`to_packed` turns such a call into a plain packed one: a dense side is flattened (a view) with uniform cu_seqlens,
and a slot with padding becomes three sequences, which the kernels already handle:

    3i:      used queries    x used keys         (the real sequence)
    3i + 1:  padding queries x no keys           (zeros, lse = -inf; with sinks the sink)
    3i + 2:  no queries      x padding keys      (nothing)

Reading seqused's values is a host sync; it happens once per device tensor (fa3nn.memo, which says what edits it
cannot see; a CPU tensor is read at every call), and the boundaries built from them are kept by value, so a training
step that hands the same tensors to every layer syncs once, and the ops' cu_seqlens checks (also remembered per
tensor) see the same boundary tensors each layer.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from fa3nn.checks import (
    SUPPORTED_DTYPES,
    check_cu_seqlens_values,
    check_has_values,
    check_tensor,
    check_varlen,
    type_name,
)
from fa3nn.memo import TensorMemo

_used_values = TensorMemo(remember_cpu=False)
# Boundary tensors by value (device, the int boundaries): the same lengths give the same tensor objects, whose
# validated values fa3nn.checks remembers. A few distinct batches per run; cleared when full.
_boundaries: dict[tuple, torch.Tensor] = {}
_MAX_BOUNDARIES = 64


def boundary_tensor(values: tuple[int, ...], device: torch.device) -> torch.Tensor:
    key = (str(device), values)
    if key not in _boundaries:
        if len(_boundaries) >= _MAX_BOUNDARIES:
            _boundaries.clear()
        with torch.inference_mode(False):  # kept for later calls, training ones too: no inference tensor
            _boundaries[key] = torch.tensor(values, dtype=torch.int32, device=device)
    return _boundaries[key]


def longest(cu_seqlens: tuple[int, ...]) -> int:
    """The longest sequence of host boundaries (0 for none)."""
    return max((b - a for a, b in zip(cu_seqlens, cu_seqlens[1:])), default=0)


@dataclass(frozen=True)
class PackedCall:
    """A slot call in the packed layout: what fa3nn.interface.attention takes, and how to give the outputs back in
    the caller's layout."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    cu_seqlens_q: torch.Tensor
    cu_seqlens_k: torch.Tensor
    max_seqlen_q: int
    max_seqlen_k: int
    dense_q: tuple[int, int] | None  # (batch, seqlen_q) when q came dense
    batch: int  # the caller's
    counts: tuple[int, ...] | None = None  # packed sequences per caller's sequence; None: one each
    caller_boundaries: bool = False  # some boundaries come from the caller's tensors (cu_seqlens, seqused), not shapes

    @property
    def split(self) -> bool:
        return self.counts is not None

    def pack_like_q(self, t):
        """A tensor laid out as the caller's q (qv), in the packed layout (anything else as it is, for the checks)."""
        return t.reshape(-1, *t.shape[2:]) if self.dense_q is not None and isinstance(t, torch.Tensor) else t

    def per_sequence(self, t):
        """A tensor with a row per caller's sequence (FP8 descales), with a row per packed sequence."""
        if self.counts is None or not isinstance(t, torch.Tensor):
            return t
        rows = tuple(i for i, n in enumerate(self.counts) for _ in range(n))  # a cached index: no copy, no sync
        return t.index_select(0, boundary_tensor(rows, t.device))

    def refined(self, cu_seqlens_q: tuple[int, ...], cu_seqlens_k: tuple[int, ...], per_packed: tuple[int, ...]
                ) -> PackedCall:
        """This call with each packed sequence cut into per_packed[i] consecutive ones at the given boundaries."""
        counts, at = [], 0
        for n in self.counts or (1,) * len(per_packed):
            counts.append(sum(per_packed[at:at + n]))
            at += n
        return dataclasses.replace(
            self, cu_seqlens_q=boundary_tensor(cu_seqlens_q, self.q.device),
            cu_seqlens_k=boundary_tensor(cu_seqlens_k, self.q.device), counts=tuple(counts),
            max_seqlen_q=longest(cu_seqlens_q), max_seqlen_k=longest(cu_seqlens_k))

    def restore(self, out: torch.Tensor, lse: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """out (total_q, nheads, dv) and lse (nheads, total_q) in q's layout: dense ones (batch, seqlen_q, nheads, dv)
        and (batch, nheads, seqlen_q) when q came dense."""
        if self.dense_q is None:
            return out, lse
        batch, seqlen_q = self.dense_q
        return (out.view(batch, seqlen_q, *out.shape[1:]),
                lse.view(lse.shape[0], batch, seqlen_q).transpose(0, 1).contiguous())  # flash_attn_func's layout


def check_not_capturing(q: torch.Tensor, what: str) -> None:
    """Boundaries read from the caller's tensors on the host would be replayed by a CUDA graph as they were at its
    capture, whatever the tensors hold later: refused while q's stream captures."""
    if q.is_cuda and torch.cuda.is_current_stream_capturing():
        raise RuntimeError(f"{what} are read on the host (fa3nn.slots, fa3nn.chunks), so a CUDA graph would replay "
                           "the lengths of its capture: call without CUDA graphs, or pack the rows with cu_seqlens")


def _dense_side(name: str, tensors: dict[str, torch.Tensor], device, dtypes):
    """A side given without cu_seqlens: its tensors flattened, uniform boundaries, (batch, slot length)."""
    for tensor_name, t in tensors.items():
        check_tensor(tensor_name, t, 4, f"(batch, seqlen, nheads, headdim): {name} is None, so {tensor_name} is dense "
                     f"(pass {name} for a packed {tensor_name})", dtypes)
    shapes = {tensor_name: tuple(t.shape[:2]) for tensor_name, t in tensors.items()}
    if len(set(shapes.values())) > 1:
        raise ValueError(f"dense {' and '.join(shapes)} must share (batch, seqlen), got {shapes}")
    batch, seqlen = next(iter(shapes.values()))
    flat = [t.reshape(batch * seqlen, *t.shape[2:]) for t in tensors.values()]
    return flat, boundary_tensor(tuple(i * seqlen for i in range(batch + 1)), device), (batch, seqlen)


def _check_seqused(name: str, used, batch: int, device: torch.device) -> None:
    if not isinstance(used, torch.Tensor):
        raise TypeError(f"{name} must be an int32 torch.Tensor of shape (batch,) = ({batch},), or None; got "
                        f"{type_name(used)}")
    if used.dtype != torch.int32 or used.shape != (batch,) or used.device != device:
        raise ValueError(f"{name} must be int32 of shape (batch,) = ({batch},) on {device}, got {used.dtype} "
                         f"{tuple(used.shape)} on {used.device}")
    check_has_values(name, used)


def _used_lengths(name: str, used, cu_name: str, starts: tuple[int, ...]) -> tuple[int, ...]:
    """seqused's values (a host read, once per GPU tensor version), each within its slot; the slot lengths without."""
    lengths = [b - a for a, b in zip(starts[:-1], starts[1:])]
    if used is None:
        return tuple(lengths)
    values = _used_values.get(used, "values", lambda: tuple(used.tolist()))
    for i, (n, slot) in enumerate(zip(values, lengths)):
        if not 0 <= n <= slot:
            raise ValueError(f"{name}[{i}] = {n} must be in [0, {slot}], the rows of slot {i} ({cu_name}[{i + 1}] - "
                             f"{cu_name}[{i}], or the dense seqlen)")
    return values


def _check_longest(max_seqlen_name: str, max_seqlen, lengths: tuple[int, ...], what: str) -> None:
    """A given max_seqlen bounds the lengths actually attended (FlashAttention-3 sizes its grid by it)."""
    if max_seqlen is None:
        return
    if isinstance(max_seqlen, bool) or not isinstance(max_seqlen, int) or max_seqlen < 0:
        raise ValueError(f"{max_seqlen_name} must be a non-negative int or None, got {max_seqlen!r}")
    longest = max(lengths, default=0)
    if longest > max_seqlen:
        raise ValueError(f"{max_seqlen_name} ({max_seqlen}) is smaller than the longest {what} ({longest})")


def split_boundaries(starts_q, used_q, starts_k, used_k) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The three-sequences-per-slot boundaries of the module docstring."""
    cu_q, cu_k = [], []
    for i in range(len(starts_q) - 1):
        cu_q += [starts_q[i], starts_q[i] + used_q[i], starts_q[i + 1]]
        cu_k += [starts_k[i], starts_k[i] + used_k[i], starts_k[i] + used_k[i]]
    return (*cu_q, starts_q[-1]), (*cu_k, starts_k[-1])


def _batch(cu_seqlens, dense) -> int | None:
    if dense is not None:
        return dense[0]
    return cu_seqlens.shape[0] - 1 if isinstance(cu_seqlens, torch.Tensor) and cu_seqlens.dim() == 1 else None


def _to_packed(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_q, seqused_k,
               dtypes) -> PackedCall:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type_name(t)}")
    seqused = seqused_q is not None or seqused_k is not None
    if seqused:
        check_not_capturing(q, "seqused_q / seqused_k")
    caller = seqused or cu_seqlens_q is not None or cu_seqlens_k is not None
    dense_q = dense_k = None
    given_q, given_k = max_seqlen_q, max_seqlen_k
    if cu_seqlens_q is None:
        (q,), cu_seqlens_q, dense_q = _dense_side("cu_seqlens_q", {"q": q}, q.device, dtypes)
        max_seqlen_q = dense_q[1]
    if cu_seqlens_k is None:
        (k, v), cu_seqlens_k, dense_k = _dense_side("cu_seqlens_k", {"k": k, "v": v}, q.device, dtypes)
        max_seqlen_k = dense_k[1]
    batch_q, batch_k = _batch(cu_seqlens_q, dense_q), _batch(cu_seqlens_k, dense_k)
    if (dense_q or dense_k) and None not in (batch_q, batch_k) and batch_q != batch_k:
        sides = [f"{'dense q' if dense_q else 'cu_seqlens_q'} has {batch_q}",
                 f"{'dense k / v' if dense_k else 'cu_seqlens_k'} has {batch_k}"]
        raise ValueError(f"q's and k's sequences must match in number: {', '.join(sides)}")
    check_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dtypes)
    batch = cu_seqlens_q.shape[0] - 1
    for name, used in (("seqused_q", seqused_q), ("seqused_k", seqused_k)):
        if used is not None:
            _check_seqused(name, used, batch, q.device)
    # cu_seqlens' values (remembered per tensor); a side whose lengths seqused gives is bounded by those below
    starts_q = check_cu_seqlens_values("cu_seqlens_q", cu_seqlens_q, q.shape[0], "max_seqlen_q",
                                       None if seqused_q is not None or dense_q else max_seqlen_q, within=True)
    starts_k = check_cu_seqlens_values("cu_seqlens_k", cu_seqlens_k, k.shape[0], "max_seqlen_k",
                                       None if seqused_k is not None or dense_k else max_seqlen_k, within=True)
    used_q = _used_lengths("seqused_q", seqused_q, "cu_seqlens_q", starts_q)
    used_k = _used_lengths("seqused_k", seqused_k, "cu_seqlens_k", starts_k)
    _check_longest("max_seqlen_q", given_q, used_q, "sequence of q" + (" (seqused_q)" if seqused_q is not None else ""))
    _check_longest("max_seqlen_k", given_k, used_k, "sequence of k" + (" (seqused_k)" if seqused_k is not None else ""))
    call = PackedCall(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dense_q, batch,
                      caller_boundaries=caller)
    if not seqused:  # a dense side only
        return call
    return call.refined(*split_boundaries(starts_q, used_q, starts_k, used_k), (3,) * batch)


def to_packed(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_q=None, seqused_k=None,
              dtypes=SUPPORTED_DTYPES) -> PackedCall:
    """flash_attn_varlen_func's tensors (module docstring) as a plain packed call (dtypes: what q, k, v may be).
    A packed call without seqused passes through as it is. Otherwise, under torch.compile, this runs eagerly (it
    reads boundary values on the host): a graph break per call that uses seqused or a dense side."""
    if cu_seqlens_q is not None and cu_seqlens_k is not None and seqused_q is None and seqused_k is None:
        batch = cu_seqlens_q.shape[0] - 1 if isinstance(cu_seqlens_q, torch.Tensor) and cu_seqlens_q.dim() else 0
        return PackedCall(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, None, batch,
                          caller_boundaries=True)
    if torch.compiler.is_compiling():
        return torch.compiler.disable(_to_packed)(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                                  seqused_q, seqused_k, dtypes)
    return _to_packed(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_q, seqused_k, dtypes)
