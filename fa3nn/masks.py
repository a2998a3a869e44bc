"""Mask semantics shared by every backend: causal and sliding-window masks, aligned bottom-right.

When seqlen_q != seqlen_k the last query row lines up with the last key column (as in FlashAttention-2/3), so
query row i may attend key j when

    i + seqlen_k - seqlen_q - left  <=  j  <=  i + seqlen_k - seqlen_q + right

with window_size = (left, right) and -1 meaning unbounded on that side. causal=True is the window (left, 0).
Causal, seqlen_q = 3, seqlen_k = 5 (x = attended):

    keys ->   0 1 2 3 4
    query 0   x x x . .
    query 1   x x x x .
    query 2   x x x x x

A query row that may attend no key (possible with seqlen_q > seqlen_k under causal, or a narrow window) outputs
zeros and lse = -inf.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Window:
    """A normalized (left, right) window; -1 means unbounded on that side."""

    left: int = -1
    right: int = -1

    @staticmethod
    def from_args(causal: bool, window_size: tuple[int, int]) -> Window:
        left, right = (int(w) for w in window_size)
        if causal:
            right = 0
        return Window(left, right)

    @property
    def causal(self) -> bool:
        """True when no query row may look past its aligned diagonal."""
        return self.right == 0

    @property
    def local(self) -> bool:
        """True when a left bound limits how far back a query row may look."""
        return self.left >= 0

    @property
    def sliding(self) -> bool:
        """True for a window beyond full and causal: a left bound, or a right bound past the diagonal (what the
        plain and causal kernels cannot take)."""
        return self.local or self.right > 0

    @property
    def unmasked(self) -> bool:
        return self.left < 0 and self.right < 0

    def kernel_sides(self, seqlen_q: int, seqlen_k: int) -> tuple[int, int]:
        """(left, right) as the kernels take them: each side no wider than the sequences, which is the same mask. The
        Triton and native kernels add the sides to row and column indices in int32, and the API takes sides up to
        2**31 - 1 (fa3nn.checks.WINDOW_MAX): row + diagonal + right wrapped around there and rows attended nothing or
        the wrong keys. A left side of seqlen_k reaches key 0 from every row (row i's first key is i + seqlen_k -
        seqlen_q - left <= -1), a right side of seqlen_q the last key from every row; for varlen calls pass lengths at
        least every sequence's (the max_seqlens, or the packed totals). -1 (unbounded) stays -1."""
        left = self.left if self.left < 0 else min(self.left, seqlen_k)
        right = self.right if self.right < 0 else min(self.right, seqlen_q)
        return left, right

    def allowed(self, row_start: int, row_end: int, seqlen_q: int, seqlen_k: int, device) -> torch.Tensor | None:
        """Bool (row_end - row_start, seqlen_k) mask of attended keys for query rows [row_start, row_end), or None
        when every key is attended."""
        if self.unmasked:
            return None
        rows = torch.arange(row_start, row_end, device=device).unsqueeze(1) + (seqlen_k - seqlen_q)
        cols = torch.arange(seqlen_k, device=device).unsqueeze(0)
        allowed = torch.ones(row_end - row_start, seqlen_k, dtype=torch.bool, device=device)
        if self.left >= 0:
            allowed &= cols >= rows - self.left
        if self.right >= 0:
            allowed &= cols <= rows + self.right
        return allowed
