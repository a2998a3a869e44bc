"""Meta and FakeTensor inputs (shape inference, deferred init, memory estimates): the calls run the ops' fake
implementations, which read no values, so packed calls work there as dense ones do."""

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import fa3nn


def _varlen_call(device=None):
    q = torch.randn(8, 4, 16, device=device, requires_grad=True)
    k = torch.randn(11, 2, 16, device=device, requires_grad=True)
    v = torch.randn(11, 2, 24, device=device, requires_grad=True)
    cu_q = torch.tensor([0, 3, 8], dtype=torch.int32, device=device)
    cu_k = torch.tensor([0, 6, 11], dtype=torch.int32, device=device)
    out, lse = fa3nn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 5, 6, causal=True, return_lse=True)
    (out.sum() + lse.sum()).backward()
    return out, lse, q.grad, k.grad, v.grad


def _meta_and_shapes(tensors):
    return [(t.device.type, tuple(t.shape), t.dtype) for t in tensors]


def test_varlen_call_on_meta_tensors_gives_shapes_and_gradients():
    """Before: NotImplementedError 'Cannot copy out of meta tensor; no data!' from the cu_seqlens check."""
    got = _meta_and_shapes(_varlen_call("meta"))
    assert got == [("meta", (8, 4, 24), torch.float32), ("meta", (4, 8), torch.float32),
                   ("meta", (8, 4, 16), torch.float32), ("meta", (11, 2, 16), torch.float32),
                   ("meta", (11, 2, 24), torch.float32)]


def test_varlen_call_under_fake_tensor_mode():
    """Before: DataDependentOutputException (aten._local_scalar_dense) from the cu_seqlens check."""
    with FakeTensorMode():
        got = _meta_and_shapes(_varlen_call())
    assert [shape for _, shape, _ in got] == [(8, 4, 24), (4, 8), (8, 4, 16), (11, 2, 16), (11, 2, 24)]


def test_calls_that_read_boundaries_on_the_host_refuse_meta_tensors_by_name():
    """attention_chunk and seqused read sequence boundaries before the op: on meta tensors, which hold no values, a
    ValueError that says so (before: 'Cannot copy out of meta tensor; no data!')."""
    q = torch.randn(2, 8, 4, 16, device="meta")
    with pytest.raises(ValueError, match=r"cu_seqlens_q is on the meta device.*attention_chunk"):
        fa3nn.flash_attn_func(q, q, q, attention_chunk=4)
    used = torch.tensor([3, 8], dtype=torch.int32, device="meta")
    with pytest.raises(ValueError, match=r"seqused_k is on the meta device"):
        fa3nn.flash_attn_varlen_func(q, q, q, None, None, 8, 8, seqused_k=used)
