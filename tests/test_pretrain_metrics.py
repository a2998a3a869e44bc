"""fa3nn.metrics' training formulas: model FLOPs per token, the GPU peak table, MFU."""

import pytest

from fa3nn.masks import Window
from fa3nn.metrics import attended_pairs, attention_flops, mfu, model_flops_per_token, peak_tflops


def test_model_flops_per_token_by_hand():
    # 6·N, plus per layer 3 x (QK^T and PV forward: 2 matmuls x 2 FLOPs x heads x head_dim x seqlen), causal halved
    n_params, layers, heads, head_dim, seqlen = 85_000_000, 12, 12, 64, 2048
    attention = 3 * layers * (2 * 2 * heads * head_dim * seqlen) / 2
    assert model_flops_per_token(n_params, layers, heads, head_dim, seqlen) == 6 * n_params + attention
    full = model_flops_per_token(n_params, layers, heads, head_dim, seqlen, causal=False)
    assert full - 6 * n_params == pytest.approx(2 * attention)
    # the attention term is the library's one formula: fwd FLOPs of one call / tokens, times 3
    one_call = attention_flops(1, heads, seqlen, seqlen, head_dim, causal=True)
    assert attention == pytest.approx(3 * layers * one_call / seqlen)


def test_peak_table_and_mfu():
    assert peak_tflops("NVIDIA H200") == 989.4
    assert peak_tflops("NVIDIA H100 80GB HBM3") == 989.4
    assert peak_tflops("NVIDIA H100 PCIe") == 756.0  # the more specific key wins over "H100"
    assert peak_tflops("NVIDIA H200", "fp8") == 1978.9
    assert peak_tflops(None) is None and peak_tflops("Some CPU") is None
    # 100k tokens/s x 1 GFLOP/token = 100 TFLOP/s = 10.1% of an H200
    assert mfu(100_000, 1e9, 989.4) == pytest.approx(100 / 989.4)
    assert mfu(100_000, 1e9, None) is None


def test_peak_table_knows_every_hopper_variant():
    """torch.cuda.get_device_name() of Hopper boards whose dense peak is not the H100 SXM's. "NVIDIA H200 NVL" matched
    the "H200" row: 989.4 TFLOP/s where NVIDIA's datasheet gives 1,671 bf16 / 3,341 fp8 with sparsity (835.5 /
    1670.5 dense, the H100 NVL's figures), so MFU read 0.84x the truth. H800 boards (H100's compute, slower links)
    matched nothing and logged "MFU n/a"."""
    assert peak_tflops("NVIDIA H200 NVL") == peak_tflops("NVIDIA H100 NVL") == 835.0
    assert peak_tflops("NVIDIA H200 NVL", "fp8") == peak_tflops("NVIDIA H100 NVL", "fp8") == 1671.0
    assert peak_tflops("NVIDIA H800") == peak_tflops("NVIDIA H100 80GB HBM3") == 989.4
    assert peak_tflops("NVIDIA H800", "fp8") == 1978.9
    assert peak_tflops("NVIDIA H800 PCIe") == peak_tflops("NVIDIA H100 PCIe") == 756.0
    assert peak_tflops("NVIDIA GH200 480GB") == peak_tflops("NVIDIA H200") == 989.4


def test_window_flops_count_attended_pairs():
    """attended_pairs against the mask itself (fa3nn.masks.Window.allowed), and attention_flops with a window: the
    full window is the dense count, a window past the sequence changes nothing, causal bounds the right side."""
    for sq, sk in ((17, 40), (40, 17), (64, 64), (1, 1), (1, 9), (9, 1), (0, 5), (5, 0)):
        for left, right in ((-1, -1), (5, 0), (-1, 3), (0, 0), (7, 2), (100, -1), (-1, 100), (2, 60), (60, 2)):
            mask = Window(left, right).allowed(0, sq, sq, sk, "cpu")
            expected = sq * sk if mask is None else int(mask.sum())
            assert attended_pairs(sq, sk, left, right) == expected, (sq, sk, left, right)
    dense = attention_flops(2, 3, 50, 50, 64, direction="bwd")
    assert attention_flops(2, 3, 50, 50, 64, direction="bwd", window=(-1, -1)) == dense
    assert attention_flops(2, 3, 50, 50, 64, window=(200, 200)) == attention_flops(2, 3, 50, 50, 64)
    assert attention_flops(2, 3, 50, 50, 64, causal=True, window=(-1, 9)) == 2.0 * 2 * 3 * (50 * 51 // 2) * 128
