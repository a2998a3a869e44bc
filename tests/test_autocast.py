"""torch.autocast around the functions and the module (fa3nn.autocast)."""

import pytest
import torch

import fa3nn

AUTOCAST = dict(device_type="cpu", dtype=torch.bfloat16)


def _inputs(seed=0, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(2, 6, 4, 32, generator=gen, dtype=dtype)
    k, v = (torch.randn(2, 7, 2, 32, generator=gen, dtype=dtype) for _ in range(2))
    return q, k, v


def _leaves(*tensors):
    return [t.clone().requires_grad_() for t in tensors]


@pytest.mark.parametrize("sinks", [False, True])
def test_bf16_call_under_autocast_is_the_call_without_it(sinks):
    """The ops run with autocast off, so the reference keeps its float32 arithmetic: out, lse and every gradient bit
    for bit those of the same call outside autocast (the reference's matmuls had run in bf16 there: out's error
    against float64 11.6x larger at seqlen 512, fa3nn.autocast)."""
    q, k, v = (t.bfloat16() for t in _inputs())
    sink_logits = torch.randn(4, generator=torch.Generator().manual_seed(2)) if sinks else None
    results = []
    for autocast in (False, True):
        leaves = _leaves(q, k, v) + ([sink_logits.clone().requires_grad_()] if sinks else [])
        with torch.autocast(**AUTOCAST, enabled=autocast):
            out, lse = fa3nn.flash_attn_func(*leaves[:3], causal=True, return_lse=True,
                                             sinks=leaves[3] if sinks else None)
            (out.float().square().sum() + lse.sum()).backward()
        results.append([out, lse] + [t.grad for t in leaves])
    for got, want in zip(*results):
        assert got.dtype == want.dtype
        assert torch.equal(got, want)
