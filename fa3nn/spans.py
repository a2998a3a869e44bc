"""Packed rows outside every sequence, as FlashAttention-3 takes them.

FlashAttention-3's varlen call reads each sequence's rows from cu_seqlens and never looks at the packed tensors'
other rows: cu_seqlens may start after row 0 or end before the last row (a buffer preallocated or padded to a fixed
token count, for CUDA graphs or torch.compile's static shapes). It leaves those rows of out unwritten; fa3nn gives
them zeros in out and in the gradients and -inf in lse (the empty log-sum-exp, as a row that attends no key), and
never reads them.

The ops (fa3nn.ops) run such a call on the covered rows (views: no copy in), with cu_seqlens shifted to start at 0
(one small device op, no host read), and spread the outputs back over the caller's rows (one copy out).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from torch import Tensor

from fa3nn.backends.base import Varlen


@dataclass(frozen=True)
class RowSpan:
    """The rows of packed q (q_rows) and k / v (k_rows) that a call's sequences cover, of total_q / total_k."""

    q_rows: slice
    k_rows: slice
    total_q: int
    total_k: int

    @staticmethod
    def of(varlen: Varlen | None, total_q: int, total_k: int) -> RowSpan | None:
        """The span of a packed call whose cu_seqlens leave rows out; None for a dense call or one that covers every
        row (the common case: nothing to narrow)."""
        return None if varlen is None else RowSpan.of_starts(varlen.seqstarts_q, varlen.seqstarts_k, total_q, total_k)

    @staticmethod
    def of_starts(starts_q: tuple[int, ...], starts_k: tuple[int, ...], total_q: int, total_k: int
                  ) -> RowSpan | None:
        """RowSpan.of from the checked cu_seqlens values (fa3nn.checks.check_cu_seqlens_values)."""
        if (starts_q[0], starts_q[-1], starts_k[0], starts_k[-1]) == (0, total_q, 0, total_k):
            return None
        return RowSpan(slice(starts_q[0], starts_q[-1]), slice(starts_k[0], starts_k[-1]), total_q, total_k)

    def inner(self, varlen: Varlen) -> Varlen:
        """varlen over the covered rows: boundaries shifted to start at 0 (a device op where they do not already)."""

        def shifted(cu: Tensor, starts: tuple[int, ...]) -> tuple[Tensor, tuple[int, ...]]:
            if starts[0] == 0:
                return cu, starts
            return cu - starts[0], tuple(s - starts[0] for s in starts)

        cu_q, starts_q = shifted(varlen.cu_seqlens_q, varlen.seqstarts_q)
        cu_k, starts_k = shifted(varlen.cu_seqlens_k, varlen.seqstarts_k)
        return replace(varlen, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, seqstarts_q=starts_q, seqstarts_k=starts_k)

    def q(self, t: Tensor | None) -> Tensor | None:
        """A packed (total_q, ...) tensor's covered rows (a view)."""
        return None if t is None else t[self.q_rows]

    def k(self, t: Tensor) -> Tensor:
        return t[self.k_rows]

    def lse(self, t: Tensor | None) -> Tensor | None:
        """A packed lse's (nheads, total_q) covered columns."""
        return None if t is None else t[:, self.q_rows]

    def spread_q(self, t: Tensor, fill: float = 0.0) -> Tensor:
        """(covered rows, ...) back to (total_q, ...), the other rows `fill`."""
        return _spread(t, 0, self.q_rows, self.total_q, fill)

    def spread_k(self, t: Tensor) -> Tensor:
        return _spread(t, 0, self.k_rows, self.total_k, 0.0)

    def spread_lse(self, t: Tensor) -> Tensor:
        return _spread(t, 1, self.q_rows, self.total_q, float("-inf"))


def _spread(t: Tensor, dim: int, rows: slice, total: int, fill: float) -> Tensor:
    shape = list(t.shape)
    shape[dim] = total
    full = t.new_full(shape, fill)
    full.narrow(dim, rows.start, rows.stop - rows.start).copy_(t)
    return full
