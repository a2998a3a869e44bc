"""Incoherent processing: one random orthogonal matrix R applied to Q and K along headdim before quantizing.

(Q R)(K R)ᵀ = Q R Rᵀ Kᵀ = Q Kᵀ, so attention is unchanged in exact arithmetic, while an outlier entry of Q or K is
spread over all of headdim, so e4m3's relative rounding error no longer lands on one huge product
(FlashAttention-3, section 3.3). R = diag(signs) · H / sqrt(d) with H the Sylvester Hadamard matrix
(H_1 = [1], H_2n = [[H_n, H_n], [H_n, -H_n]]) and random ±1 signs: a kernel applies it as a sign flip and a fast
Walsh-Hadamard transform (d log d adds) or as one d x d GEMM. For a headdim that is not a power of two (96, 192)
R is block-diagonal with Hadamard blocks of the largest power of two dividing d: still orthogonal, spreading within
each block.

The signs are drawn once per layer from (recipe seed, layer index) and kept in a buffer, so they are fixed for the
life of the module and restored exactly by load_state_dict.
"""

from __future__ import annotations

import torch
from torch import nn

MAX_HEADDIM = 256
# Mixes the layer index into the recipe seed so that neighbouring layers get unrelated sign vectors.
_LAYER_SEED_STRIDE = 1_000_003


def sylvester_hadamard(n: int, dtype=torch.float32, device=None) -> torch.Tensor:
    """The n x n Sylvester Hadamard matrix of ±1 entries (n a power of two); H Hᵀ = n I."""
    if n < 1 or n & (n - 1):
        raise ValueError(f"Sylvester Hadamard matrices exist for powers of two, got n = {n}")
    h = torch.ones(1, 1, dtype=dtype, device=device)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], dim=1), torch.cat([h, -h], dim=1)], dim=0)
    return h


def hadamard_block_size(headdim: int) -> int:
    """The largest power of two dividing headdim (headdim itself when it is a power of two)."""
    return headdim & -headdim


def random_sign_hadamard(signs: torch.Tensor) -> torch.Tensor:
    """R = diag(signs) · blockdiag(H_n, ...) / sqrt(n), orthogonal, float32 (d, d) for d = len(signs)."""
    headdim = signs.numel()
    block = hadamard_block_size(headdim)
    h = sylvester_hadamard(block, torch.float32, signs.device) / block**0.5
    blocks = torch.block_diag(*([h] * (headdim // block)))
    return signs.to(torch.float32).unsqueeze(1) * blocks


def random_signs(seed: int, length: int = MAX_HEADDIM) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 2, (length,), generator=generator).to(torch.float32) * 2 - 1


class HadamardRotation(nn.Module):
    """A layer's incoherent-processing state: MAX_HEADDIM random signs in a buffer; rotation(headdim) uses the
    first headdim of them. x @ rotation is applied to Q and K (rows of headdim) before quantization."""

    def __init__(self, seed: int = 0, layer_idx: int = 0):
        super().__init__()
        for name, value in (("seed", seed), ("layer_idx", layer_idx)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"HadamardRotation {name} must be an int >= 0, got {type(value).__name__} {value!r}")
            if value < 0:
                raise ValueError(f"HadamardRotation {name} must be an int >= 0, got {value}")
        # torch.Generator takes seeds below 2**64: larger mixes wrap around (any seed, any layer index)
        self.register_buffer("hadamard_signs", random_signs((seed + _LAYER_SEED_STRIDE * layer_idx) % 2**64))
        # The cached rotations, {device: matrix}, and the (signs tensor, its _version, headdim) they were built from.
        self._cache: dict = {}
        self._cache_source: tuple = ()

    def rotation(self, headdim: int, device: torch.device | None = None) -> torch.Tensor:
        """The (headdim, headdim) float32 matrix, on `device` (default: the signs' device). Cached per device: the
        stateless functions keep this module on the CPU, and copying the matrix to the GPU on every call is a
        pageable host-to-device copy, which makes the host wait for all queued GPU work."""
        if headdim > self.hadamard_signs.numel():
            raise ValueError(
                f"incoherent processing supports headdim <= {self.hadamard_signs.numel()}, got {headdim}; "
                f"use PerTileScaling(incoherent=False)"
            )
        device = torch.device(device) if device is not None else self.hadamard_signs.device
        if torch.compiler.is_compiling():  # traced into the graph (a version-keyed cache cannot be)
            return random_sign_hadamard(self.hadamard_signs[:headdim]).to(device)
        if self.hadamard_signs.is_inference():
            # A module made under torch.inference_mode: its signs have no version counter to key a cache on (an
            # inference_mode load_state_dict may rewrite them in place), so the matrix is built per call.
            return self._built(headdim, device)
        if not self._cache_is_for(headdim):
            self._cache = {}
            self._cache_source = (self.hadamard_signs, self.hadamard_signs._version, headdim)
        if device not in self._cache:
            self._cache[device] = self._built(headdim, device)
        return self._cache[device]

    def _built(self, headdim: int, device: torch.device) -> torch.Tensor:
        """The matrix built outside inference mode, whatever the caller's: one made by an inference_mode evaluation
        and kept (cached) is an inference tensor, which a later training forward cannot save for its backward
        (RuntimeError at the first training step after an evaluation)."""
        with torch.inference_mode(False):
            return random_sign_hadamard(self.hadamard_signs[:headdim]).to(device)

    def _cache_is_for(self, headdim: int) -> bool:
        """Whether the cached rotations were built from the current signs. load_state_dict copies new signs into
        the tensor (its _version changes); with assign=True, or after a move, it is another tensor, whose _version
        can equal the old one's (0 for a fresh tensor): so the tensor itself is compared, and held, so that its id
        cannot pass to a later one."""
        if not self._cache_source:
            return False
        signs, version, cached_headdim = self._cache_source
        return signs is self.hadamard_signs and version == signs._version and cached_headdim == headdim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (..., headdim) -> x @ R in float32."""
        return x.to(torch.float32, memory_format=torch.contiguous_format) @ self.rotation(x.shape[-1])  # (quantize.py)
