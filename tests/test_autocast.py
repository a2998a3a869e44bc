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


@pytest.mark.parametrize("entry", ["function", "module", "varlen"])
def test_float32_inputs_run_in_the_autocast_dtype_with_float32_gradients(entry):
    """Before: float32 out under a bf16 autocast (on a GPU, auto then ran the slow float32 reference). Now out is
    bf16 and bit for bit the call on inputs cast to bf16 first, and the float32 leaves get float32 gradients equal to
    those through that explicit cast."""
    def run(q, k, v):
        if entry == "function":
            return fa3nn.flash_attn_func(q, k, v, causal=True)
        if entry == "module":
            return fa3nn.FlashAttentionV3(causal=True)(q, k, v)
        cu_q = torch.tensor([0, 6, 12], dtype=torch.int32)
        cu_k = torch.tensor([0, 7, 14], dtype=torch.int32)
        out = fa3nn.flash_attn_varlen_func(q.flatten(0, 1), k.flatten(0, 1), v.flatten(0, 1), cu_q, cu_k, 6, 7,
                                           causal=True)
        return out.view(q.shape)

    q, k, v = _inputs()
    dout = torch.randn(2, 6, 4, 32, generator=torch.Generator().manual_seed(1))
    leaves = _leaves(q, k, v)
    with torch.autocast(**AUTOCAST):
        out = run(*leaves)
    out.backward(dout.to(out.dtype))
    expected_leaves = _leaves(q, k, v)
    expected = run(*(t.bfloat16() for t in expected_leaves))
    expected.backward(dout.bfloat16())
    assert out.dtype == torch.bfloat16
    assert torch.equal(out, expected)
    for got, want in zip(leaves, expected_leaves):
        assert got.grad.dtype == torch.float32
        assert torch.equal(got.grad, want.grad)


def test_mixed_dtypes_from_autocast_layers_run_as_sdpa_does():
    """A bf16 q from an autocast Linear with float32 k, v raised 'q, k and v must share one dtype' where torch's SDPA
    runs; now all three run in bf16, out within bf16 rounding of SDPA under the same autocast (measured 7.8e-3)."""
    q, k, v = _inputs()
    with torch.autocast(**AUTOCAST):
        out = fa3nn.flash_attn_func(q.bfloat16(), k, v)
        sdpa = torch.nn.functional.scaled_dot_product_attention(
            q.bfloat16().transpose(1, 2), k.repeat_interleave(2, dim=2).transpose(1, 2),
            v.repeat_interleave(2, dim=2).transpose(1, 2)).transpose(1, 2)
    assert out.dtype == sdpa.dtype == torch.bfloat16
    assert (out.float() - sdpa.float()).abs().max().item() < 2e-2


def test_float64_and_outside_autocast_are_left_alone():
    """autocast's rule: float64 is never cast; outside autocast a float32 call stays float32."""
    q, k, v = _inputs(dtype=torch.float64)
    with torch.autocast(**AUTOCAST):
        assert fa3nn.flash_attn_func(q, k, v).dtype == torch.float64
    assert fa3nn.flash_attn_func(q.float(), k.float(), v.float()).dtype == torch.float32


def test_explain_sees_the_autocast_dtype():
    """explain checks a call as the call itself would: under autocast, mixed dtypes are no error there either."""
    q, k, v = _inputs()
    with torch.autocast(**AUTOCAST):
        assert fa3nn.explain(q.bfloat16(), k, v).forward == "reference"


def test_compiled_call_under_autocast_matches_eager():
    """fullgraph=True traces the autocast cast (fa3nn.autocast reads autocast's state with functions torch 2.11's
    Dynamo can trace: torch.amp.is_autocast_available failed every fullgraph compile there); out and the float32
    gradients as in eager."""
    q, k, v = _inputs()
    compiled = torch.compile(lambda q, k, v: fa3nn.flash_attn_func(q, k, v, causal=True), fullgraph=True,
                             backend="aot_eager")
    results = []
    for run in (compiled, lambda q, k, v: fa3nn.flash_attn_func(q, k, v, causal=True)):
        leaves = _leaves(q, k, v)
        with torch.autocast(**AUTOCAST):
            out = run(*leaves)
        out.float().square().sum().backward()
        results.append([out] + [t.grad for t in leaves])
    assert results[0][0].dtype == torch.bfloat16
    for got, want in zip(*results):
        assert torch.equal(got, want)
