"""Scaling math (amax -> scale, saturating cast, tile reductions over dense and packed layouts) and the Hadamard
rotation of incoherent processing."""

import math

import pytest
import torch

from fa3nn.fp8 import (
    E4M3_MAX,
    HadamardRotation,
    amax_to_scale,
    random_sign_hadamard,
    saturated_cast,
    sylvester_hadamard,
)
from fa3nn.fp8.scaling import mean_drift, rows_from_tiles, tile_amax
from fa3nn.testing import unpad


def test_amax_to_scale_formula_and_margin():
    amax = torch.tensor([1.0, 448.0, 3.5])
    scale, bad = amax_to_scale(amax)
    torch.testing.assert_close(scale, torch.tensor([448.0, 1.0, 128.0]), rtol=0, atol=0)
    assert not bad.any()
    scale, _ = amax_to_scale(amax, margin=2)
    torch.testing.assert_close(scale, torch.tensor([112.0, 0.25, 32.0]), rtol=0, atol=0)


def test_amax_to_scale_bad_amax_keeps_fallback():
    amax = torch.tensor([0.0, float("nan"), float("inf"), 1e-45, 2.0])
    previous = torch.tensor([5.0, 6.0, 7.0, 8.0, 9.0])
    scale, bad = amax_to_scale(amax, fallback=previous)
    assert bad.tolist() == [True, True, True, True, False]  # 448 / 1e-45 overflows fp32: treated as bad
    torch.testing.assert_close(scale, torch.tensor([5.0, 6.0, 7.0, 8.0, 224.0]), rtol=0, atol=0)


def test_saturated_cast_saturates_and_rounds_to_nearest_even():
    x = torch.tensor([1000.0, -1000.0, float("inf"), float("-inf"), 448.0, 1.0625, 1.1875, float("nan")])
    y = saturated_cast(x, torch.tensor(1.0)).to(torch.float32)
    assert y[:5].tolist() == [448.0, -448.0, 448.0, -448.0, 448.0]
    # e4m3 spacing at 1 is 1/8: 1.0625 is a tie -> even mantissa 1.0; 1.1875 is a tie -> 1.25
    assert y[5:7].tolist() == [1.0, 1.25]
    assert torch.isnan(y[7])


def test_tile_amax_dense_matches_loop():
    x = torch.randn(2, 300, 3, 16)
    block = 128
    amax = tile_amax(x, block)
    assert amax.shape == (2, 3, 3)
    for b in range(2):
        for h in range(3):
            for t in range(3):
                rows = x[b, t * block : (t + 1) * block, h]
                assert amax[b, h, t] == rows.abs().max()


def test_tile_amax_packed_tiles_restart_at_each_sequence():
    lengths = [5, 0, 130, 1]
    block = 4
    mask = torch.arange(130).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
    dense = torch.randn(len(lengths), 130, 2, 8)
    packed, cu_seqlens, max_seqlen = unpad(dense, mask)
    amax = tile_amax(packed, block, cu_seqlens, max_seqlen)
    tiles = math.ceil(130 / block)
    assert amax.shape == (4, 2, tiles)
    for seq, length in enumerate(lengths):
        for t in range(tiles):
            rows = dense[seq, t * block : min(length, (t + 1) * block)]
            expect = rows.abs().amax(dim=(0, 2)) if rows.shape[0] > 0 else torch.zeros(2)
            torch.testing.assert_close(amax[seq, :, t], expect, rtol=0, atol=0)
    # A tile that straddled sequences would mix sequence 0's rows 4..5 with sequence 2's first rows.
    assert amax[0, :, 1].tolist() == dense[0, 4:5].abs().amax(dim=(0, 2)).tolist()


def test_rows_from_tiles_inverts_the_tile_layout():
    per_tile = torch.arange(2 * 3 * 4, dtype=torch.float32).view(2, 3, 4)
    rows = rows_from_tiles(per_tile, 8, 27)
    assert rows.shape == (2, 27, 3)
    assert rows[1, 26, 2] == per_tile[1, 2, 3]
    assert rows[0, 7, 1] == per_tile[0, 1, 0] and rows[0, 8, 1] == per_tile[0, 1, 1]
    cu_seqlens = torch.tensor([0, 3, 12], dtype=torch.int32)
    packed = rows_from_tiles(per_tile[:, :, :2], 8, 12, cu_seqlens)
    assert packed.shape == (12, 3)
    assert packed[2, 0] == per_tile[0, 0, 0]  # sequence 0 (3 rows): tile 0
    assert packed[3, 0] == per_tile[1, 0, 0] and packed[11, 0] == per_tile[1, 0, 1]  # sequence 1 restarts at tile 0


def test_sylvester_hadamard():
    h = sylvester_hadamard(8)
    torch.testing.assert_close(h @ h.T, 8 * torch.eye(8), rtol=0, atol=0)
    assert set(h.unique().tolist()) == {-1.0, 1.0}
    with pytest.raises(ValueError, match="powers of two"):
        sylvester_hadamard(12)


@pytest.mark.parametrize("headdim", [64, 96, 128, 192, 256])
def test_random_sign_hadamard_is_orthogonal_and_preserves_qk(headdim):
    rotation = HadamardRotation(seed=3, layer_idx=1).rotation(headdim)
    torch.testing.assert_close(rotation @ rotation.T, torch.eye(headdim), rtol=0, atol=1e-6)
    q, k = torch.randn(5, headdim, dtype=torch.float64), torch.randn(7, headdim, dtype=torch.float64)
    r = rotation.double()
    torch.testing.assert_close((q @ r) @ (k @ r).T, q @ k.T, rtol=1e-6, atol=1e-6)


def test_rotation_spreads_an_outlier():
    x = torch.zeros(128)
    x[17] = 100.0
    rotated = HadamardRotation(seed=0).forward(x)
    assert rotated.abs().max() == pytest.approx(100 / math.sqrt(128), rel=1e-6)  # spread evenly over headdim


def test_rotation_seeded_per_layer_and_restored_by_state_dict():
    a, b, a_again = HadamardRotation(0, layer_idx=0), HadamardRotation(0, layer_idx=1), HadamardRotation(0, 0)
    assert torch.equal(a.hadamard_signs, a_again.hadamard_signs)
    assert not torch.equal(a.hadamard_signs, b.hadamard_signs)
    assert not torch.equal(HadamardRotation(1, 0).hadamard_signs, a.hadamard_signs)
    before = b.rotation(128).clone()
    b.load_state_dict(a.state_dict())
    assert "hadamard_signs" in a.state_dict()
    torch.testing.assert_close(b.rotation(128), a.rotation(128), rtol=0, atol=0)  # the cached matrix was refreshed
    assert not torch.equal(before, b.rotation(128))
    torch.testing.assert_close(random_sign_hadamard(a.hadamard_signs[:128]), a.rotation(128), rtol=0, atol=0)


def test_rotation_cached_per_device():
    """The functions keep their rotation state on the CPU; the matrix for another device is made once, not copied
    per call (a pageable host-to-device copy stalls the host until the GPU's queue drains)."""
    rotation = HadamardRotation(0)
    on_cpu = rotation.rotation(64, torch.device("cpu"))
    assert rotation.rotation(64, "cpu") is on_cpu and rotation.rotation(64) is on_cpu
    rotation.hadamard_signs.neg_()  # an in-place change of the signs (load_state_dict) drops every cached copy
    assert not torch.equal(rotation.rotation(64, "cpu"), on_cpu)


def test_e4m3_max():
    assert E4M3_MAX == 448.0


def test_mean_drift_is_the_relative_change_of_the_mean():
    ref = torch.randn(4, 100, dtype=torch.float64) + 2.0
    assert mean_drift(ref, ref) == 0.0
    assert abs(mean_drift(ref * 0.99, ref) - (-0.01)) < 1e-12  # a kernel that lost 1% of the mean
    # Zero-mean noise added to the output moves the mean by its own mean only, unlike the rms error.
    noise = torch.randn(4, 100, dtype=torch.float64)
    noise -= noise.mean()
    assert abs(mean_drift(ref + noise, ref)) < 1e-12
    assert mean_drift(ref.float(), ref) == pytest.approx(0.0, abs=1e-7)  # fp32 inputs are compared in fp64
