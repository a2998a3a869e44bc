"""scripts/bench_cudnn_fp8.py's host-side helpers on CPU: the per-tensor quantization that feeds both kernels (one
scale per tensor, in fa3nn's (batch, nheads, 1) descale layout and as cuDNN's scalars) and the head-chunked fp32
reference. The cuDNN graph and the timing need a Hopper GPU and cudnn-frontend; the script has not run there yet."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from fa3nn.fp8.scaling import E4M3_MAX
from fa3nn.testing.reference import attention_ref

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "bench_cudnn_fp8.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_cudnn_fp8", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _qkv(batch=2, seqlen=48, nheads=3, d=16):
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(batch, seqlen, nheads, d, generator=gen) for _ in range(3))
    return q, k * 3, v * 0.25  # different amaxes, so a mixed-up scale shows


def test_per_tensor_scales_one_value_in_both_layouts(bench):
    q, k, v = _qkv()
    quantized = bench.per_tensor_quantize(q, k, v)
    scalars = bench.tensor_descales(quantized)
    assert quantized.block_q == quantized.block_k == q.shape[1]  # one tile per (batch, head): fp8_forward's rule
    for x, x8, descale, scalar in zip((q, k, v), (quantized.q, quantized.k, quantized.v),
                                      (quantized.q_descale, quantized.k_descale, quantized.v_descale), scalars):
        assert descale.shape == (q.shape[0], q.shape[2], 1)
        assert scalar.shape == (1, 1, 1, 1) and scalar.dtype == torch.float32
        torch.testing.assert_close(descale, scalar.reshape(1, 1, 1).expand_as(descale), rtol=0, atol=0)
        torch.testing.assert_close(scalar.reshape(()), x.abs().amax() / E4M3_MAX, rtol=1e-6, atol=0)
        assert x8.float().abs().amax().item() == E4M3_MAX  # the tensor's largest |x| lands on e4m3's max


def test_dequantize_is_x8_times_its_tensor_descale(bench):
    quantized = bench.per_tensor_quantize(*_qkv())
    for x8, descale, deq in zip((quantized.q, quantized.k, quantized.v),
                                (quantized.q_descale, quantized.k_descale, quantized.v_descale),
                                bench.dequantize(quantized)):
        torch.testing.assert_close(deq, x8.float() * descale[0, 0, 0], rtol=0, atol=0)


@pytest.mark.parametrize("causal", [False, True])
def test_chunked_reference_matches_whole_tensor(bench, causal):
    q, k, v = _qkv()
    scale = 0.3
    whole = attention_ref(q, k, v, causal=causal, softmax_scale=scale, upcast=False)[0]
    # max_bytes below one head's scores: one (batch, head) slice at a time
    chunked = bench.reference_out(q, k, v, causal, scale, max_bytes=1)
    torch.testing.assert_close(chunked, whole, rtol=1e-5, atol=1e-6)
    assert not torch.equal(chunked, bench.reference_out(q, k, v, not causal, scale, max_bytes=1))
