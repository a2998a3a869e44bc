"""The custom ops pass torch.library.opcheck, and torch.compile(fullgraph=True) traces a model with no graph break."""

import re

import pytest
import torch

import fa3nn
from fa3nn.ops import attention_backward, attention_call, attention_forward
from fa3nn.testing import random_qkv


def dense_args(dtype=torch.float32, requires_grad=True):
    q, k, v = random_qkv(2, 9, 13, 4, 2, 16, dtype, requires_grad=requires_grad)
    return (q, k, v, None, None, 9, 13, 0.25, -1, 0, 0.0, False, "reference")


def varlen_args(requires_grad=True):
    q = torch.randn(8, 4, 16, requires_grad=requires_grad)
    k = torch.randn(11, 2, 16, requires_grad=requires_grad)
    v = torch.randn(11, 2, 16, requires_grad=requires_grad)
    cu_q = torch.tensor([0, 3, 8], dtype=torch.int32)
    cu_k = torch.tensor([0, 6, 11], dtype=torch.int32)
    return (q, k, v, cu_q, cu_k, 5, 6, 0.25, 4, 0, 2.0, False, "reference")


def with_sinks(make_args):
    """make_args' arguments with fa3nn::fwd's sinks (a logit per query head, fa3nn.sinks) after backend."""
    def make(requires_grad=True):
        return (*make_args(requires_grad=requires_grad), torch.randn(4, requires_grad=requires_grad))
    make.__name__ = f"{make_args.__name__}_sinks"
    return make


ARGS = [dense_args, varlen_args, with_sinks(dense_args), with_sinks(varlen_args)]


@pytest.mark.parametrize("make_args", ARGS, ids=lambda f: f.__name__)
def test_opcheck_forward(make_args):
    torch.library.opcheck(attention_forward, make_args())


@pytest.mark.parametrize("varlen", [False, True], ids=["dense", "varlen"])
def test_opcheck_forward_fp8_inputs(varlen):
    """fa3nn::fwd_fp8_inputs (FlashAttention-3's FP8 call, forward only): its fake implementation and AOT dispatch as
    opcheck sees them. Not opcheck's test_schema: it multiplies the inputs to detect mutation, which torch has no
    CPU kernel for in float8 ("mul_cpu_reduced_float" not implemented for 'Float8_e4m3fn')."""
    from fa3nn.ops import attention_forward_fp8_inputs

    e4m3 = torch.float8_e4m3fn
    if varlen:
        q8, k8, v8 = (torch.randn(n, h, 32).to(e4m3) for n, h in ((15, 4), (19, 2), (19, 2)))
        cu_q, cu_k = torch.tensor([0, 6, 15], dtype=torch.int32), torch.tensor([0, 11, 19], dtype=torch.int32)
        lengths = (cu_q, cu_k, 9, 11)
    else:
        q8, k8, v8 = (torch.randn(2, n, h, 32).to(e4m3) for n, h in ((9, 4), (13, 2), (13, 2)))
        lengths = (None, None, 9, 13)
    descales = [torch.rand(2, 2) + 0.5 for _ in range(3)]
    args = (q8, k8, v8, *descales, *lengths, 0.2, -1, 0, 0.0, "reference")
    for test in ("test_faketensor", "test_aot_dispatch_static", "test_aot_dispatch_dynamic"):
        torch.library.opcheck(attention_forward_fp8_inputs, args, test_utils=test)


@pytest.mark.parametrize("make_args", ARGS, ids=lambda f: f.__name__)
def test_opcheck_backward(make_args):
    args = make_args(requires_grad=False)
    q, k, v = args[:3]
    out, lse = attention_forward(*args)
    dout, dlse = torch.randn_like(out), torch.randn_like(lse)
    torch.library.opcheck(attention_backward, (dout, q, k, v, out, lse, dlse, *args[3:]))
    torch.library.opcheck(attention_backward, (dout, q, k, v, out, lse, None, *args[3:]))


@pytest.mark.parametrize("make_args", ARGS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("use_lse", [False, True])
def test_eager_path_equals_custom_op(make_args, use_lse):
    """Eager calls skip the custom-op dispatcher (fa3nn.ops._EagerAttention); outputs and gradients must be bitwise
    those of the registered op with its autograd, with and without a gradient flowing into lse, with and without
    sinks (their gradient too)."""
    args = make_args()
    sinks = args[13:]  # () or (sinks,)
    results = []
    for call in (attention_call, attention_forward):
        inputs = [t.detach().clone().requires_grad_() for t in args[:3] + sinks]
        if call is attention_call:
            out, lse = call(*inputs[:3], *args[3:13], sinks=inputs[3] if sinks else None)
        else:
            out, lse = call(*inputs[:3], *args[3:13], *inputs[3:])
        loss = (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum() + (lse.sum() if use_lse else 0)
        results.append((out, lse, *torch.autograd.grad(loss, inputs)))
    for eager, op in zip(*results):
        assert torch.equal(eager, op)
    assert type(attention_call(*args[:13], sinks=(sinks or (None,))[0])[0].grad_fn).__name__ == (
        "_EagerAttentionBackward")


def test_fp32_lse_is_float64_in_the_op_float32_for_the_user():
    """fa3nn::fwd keeps float32 inputs' lse in float64 for the backward (fa3nn.backends.base.saved_lse_dtype); the
    public functions hand the user float32 (FA3's dtype), and a gradient into that lse reaches the inputs as one
    into the op's own lse does."""
    args = dense_args()
    q, k, v = args[:3]
    _, lse_op = attention_call(*args)
    out, lse = fa3nn.flash_attn_func(q, k, v, softmax_scale=0.25, causal=True, return_lse=True, backend="reference")
    assert lse_op.dtype == torch.float64 and lse.dtype == torch.float32
    assert torch.equal(lse, lse_op.float())
    assert torch.equal(torch.autograd.grad(lse.sum(), q)[0], torch.autograd.grad(lse_op.sum(), q)[0])


class TinyAttentionBlock(torch.nn.Module):
    def __init__(self, dim=64, nheads=4, nheads_kv=2, sinks=False):
        super().__init__()
        self.nheads, self.nheads_kv, self.headdim = nheads, nheads_kv, dim // nheads
        self.wq = torch.nn.Linear(dim, dim)
        self.wkv = torch.nn.Linear(dim, 2 * nheads_kv * self.headdim)
        self.attn = fa3nn.FlashAttentionV3(causal=True, window_size=(16, -1))
        self.sinks = torch.nn.Parameter(torch.randn(nheads)) if sinks else None  # gpt-oss's

    def forward(self, x):
        b, s, _ = x.shape
        q = self.wq(x).view(b, s, self.nheads, self.headdim)
        k, v = self.wkv(x).view(b, s, 2, self.nheads_kv, self.headdim).unbind(2)
        return self.attn(q, k, v, sinks=self.sinks).reshape(b, s, -1)


@pytest.mark.parametrize("sinks", [False, True], ids=["plain", "sinks"])
def test_compile_fullgraph_forward_and_backward(sinks):
    torch._dynamo.reset()
    model = TinyAttentionBlock(sinks=sinks)
    x = torch.randn(2, 24, 64, requires_grad=True)
    weights = [x] + ([model.sinks] if sinks else [])
    expected = model(x)
    expected_grads = torch.autograd.grad(expected.sum(), weights)
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    got = compiled(x)
    got_grads = torch.autograd.grad(got.sum(), weights)
    torch.testing.assert_close(got, expected)
    for g, e in zip(got_grads, expected_grads):
        torch.testing.assert_close(g, e)
        assert e.abs().sum() > 0


def test_compile_fullgraph_inductor_varlen():
    torch._dynamo.reset()
    q, k, v = varlen_args()[:3]
    cu_q = torch.tensor([0, 3, 8], dtype=torch.int32)
    cu_k = torch.tensor([0, 6, 11], dtype=torch.int32)

    def f(q, k, v):
        return fa3nn.flash_attn_varlen_func(q * 2, k, v, cu_q, cu_k, 5, 6, causal=True).sum()

    expected = f(q, k, v)
    got = torch.compile(f, fullgraph=True)(q, k, v)
    torch.testing.assert_close(got, expected)


def _dense_call(seqlen):
    q, k, v = random_qkv(2, seqlen, seqlen + 3, 4, 2, 16, torch.float32, requires_grad=True)
    return (q, k, v)


def _varlen_call(seqlen):
    lengths_q, lengths_k = (3, seqlen - 3), (seqlen - 2, 5)
    q = torch.randn(sum(lengths_q), 4, 16, requires_grad=True)
    k, v = (torch.randn(sum(lengths_k), 2, 16, requires_grad=True) for _ in range(2))
    cu_q, cu_k = (torch.tensor([0, n[0], sum(n)], dtype=torch.int32) for n in (lengths_q, lengths_k))
    return (q, k, v, cu_q, cu_k, max(lengths_q), max(lengths_k))


def _qkvpacked_call(seqlen):
    return (torch.randn(2, seqlen, 3, 4, 16, requires_grad=True),)


_window_layer = fa3nn.FlashAttentionV3(causal=True, window_size=(4, -1), backend="reference")

# Each public entry point, and how to build its inputs at a sequence length. Under dynamic=True the defaulted
# softmax_scale (headdim ** -0.5), a function's float defaults (softcap=0.0) and the compiled function's own float
# arguments are symbolic.
DYNAMIC_CALLS = {
    "flash_attn_func": (lambda q, k, v: fa3nn.flash_attn_func(q, k, v, causal=True, backend="reference"),
                        _dense_call),
    "flash_attn_func_softcap": (lambda q, k, v, softcap=5.0: fa3nn.flash_attn_func(
        q, k, v, causal=True, softcap=softcap, backend="reference"), _dense_call),
    "flash_attn_varlen_func": (lambda q, k, v, cu_q, cu_k, max_q, max_k: fa3nn.flash_attn_varlen_func(
        q, k, v, cu_q, cu_k, max_q, max_k, causal=True, backend="reference"), _varlen_call),
    "flash_attn_qkvpacked_func": (lambda qkv: fa3nn.flash_attn_qkvpacked_func(qkv, causal=True, backend="reference"),
                                  _qkvpacked_call),
    "FlashAttentionV3": (lambda q, k, v: _window_layer(q, k, v), _dense_call),
}


@pytest.mark.parametrize("name", list(DYNAMIC_CALLS))
def test_compile_dynamic_fullgraph_matches_eager(name):
    """torch.compile(dynamic=True, fullgraph=True) traces every entry point with a symbolic headdim and symbolic
    float options: the checks compare them instead of calling math.isfinite, which Dynamo refused ("torch.* op
    returned non-Tensor"). Forward and backward equal eager's at two sequence lengths, the second one without a
    recompile."""
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    fn, make_args = DYNAMIC_CALLS[name]
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(fn, dynamic=True, fullgraph=True, backend=counter)
    frames = []
    for seqlen in (9, 14):
        args = make_args(seqlen)
        leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
        expected = fn(*args)
        expected_grads = torch.autograd.grad(expected.square().sum(), leaves)
        got = compiled(*args)
        got_grads = torch.autograd.grad(got.square().sum(), leaves)
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
        for g, e in zip(got_grads, expected_grads):
            torch.testing.assert_close(g, e, rtol=0, atol=0)
            assert e.abs().sum() > 0
        frames.append(counter.frame_count)
    assert frames[1] == frames[0] > 0  # the graphs of the first length serve the second


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 1e39], ids=["nan", "inf", "1e39"])
def test_compile_dynamic_refuses_a_bad_softmax_scale_with_eager_message(bad):
    """A user's softmax_scale is symbolic under dynamic=True as well; its checks still refuse NaN, inf and values
    beyond float32 with eager's message (inside Dynamo's error under fullgraph, as a ValueError without it)."""
    def f(q, k, v, scale):
        return fa3nn.flash_attn_func(q, k, v, softmax_scale=scale, backend="reference")

    q, k, v = _dense_call(8)
    message = (f"softmax_scale must be finite, got {bad}" if bad != 1e39 else
               "softmax_scale must be at most 3.403e+38 in magnitude (float32's largest finite value), got 1e+39")
    with pytest.raises(ValueError, match=re.escape(message)):
        f(q, k, v, bad)
    torch._dynamo.reset()
    fullgraph = torch.compile(f, dynamic=True, fullgraph=True, backend="aot_eager")
    fullgraph(q, k, v, 0.5)  # a graph with a symbolic scale first
    with pytest.raises(torch._dynamo.exc.Unsupported, match=re.escape(message)):
        fullgraph(q, k, v, bad)
    torch._dynamo.reset()
    with pytest.raises(ValueError, match=re.escape(message)):
        torch.compile(f, dynamic=True, backend="aot_eager")(q, k, v, bad)


@pytest.mark.parametrize("fp8", [None, "per_tile"])
def test_explain_inside_a_fullgraph_compiled_function(fp8):
    """fa3nn.explain of a dense call traces under torch.compile(fullgraph=True): it reads only shapes, dtypes and
    options, so the compiled function returns the same Explanation as eager (a constant of the graph, guarded on the
    shapes)."""
    torch._dynamo.reset()
    q, k, v = random_qkv(1, 8, 8, 2, 2, 16, torch.float32)

    def f(q, k, v):
        return q * 2, fa3nn.explain(q, k, v, causal=True, window_size=(3, 0), fp8=fp8, backend="reference")

    doubled, found = torch.compile(f, fullgraph=True)(q, k, v)
    expected = fa3nn.explain(q, k, v, causal=True, window_size=(3, 0), fp8=fp8, backend="reference")
    assert found == expected and torch.equal(doubled, q * 2)
    assert (found.forward, found.backward) == ("fp8 emulation (reference)" if fp8 else "reference", "reference")


def test_explain_of_a_varlen_call_under_compile():
    """explain of a varlen call reads cu_seqlens on the host (the checks the call makes inside its op), which a graph
    cannot: under fullgraph=True it refuses with a message saying so (Dynamo's own was about a function marked as
    skipped, torch.compiler.disable's); without fullgraph the refusal breaks the graph, explain runs eagerly and the
    answer is eager's."""
    torch._dynamo.reset()
    q, k, v = varlen_args(requires_grad=False)[:3]
    cu_q = torch.tensor([0, 3, 8], dtype=torch.int32)
    cu_k = torch.tensor([0, 6, 11], dtype=torch.int32)

    def f(q, k, v, cu_q, cu_k):
        return fa3nn.explain(q, k, v, cu_q, cu_k, 5, 6, causal=True, backend="reference")

    expected = f(q, k, v, cu_q, cu_k)
    assert (expected.forward, expected.backward) == ("reference", "reference")
    message = ("fa3nn.explain of a varlen or chunked call (cu_seqlens, seqused or attention_chunk given) reads "
               "boundaries on the host, which torch.compile cannot trace; call explain outside the compiled function")
    with pytest.raises(torch._dynamo.exc.Unsupported, match=re.escape(message)) as refused:
        torch.compile(f, fullgraph=True)(q, k, v, cu_q, cu_k)
    assert "RuntimeError" in str(refused.value) and "marked as skipped" not in str(refused.value)
    torch._dynamo.reset()
    assert torch.compile(f)(q, k, v, cu_q, cu_k) == expected


def _dual_forward(f, q, k, v, tangent):
    import torch.autograd.forward_ad as fwAD

    with fwAD.dual_level():
        return fwAD.unpack_dual(f(fwAD.make_dual(q, tangent), k, v)).tangent


TRANSFORMS = {  # each way of asking for a transformed attention; the compiled ones lost the tangent silently (0, None)
    "vmap": lambda f, q, k, v: torch.func.vmap(f)(q[None], k[None], v[None]),
    "grad": lambda f, q, k, v: torch.func.grad(lambda q: f(q, k, v).sum())(q),
    "jvp": lambda f, q, k, v: torch.func.jvp(lambda q: f(q, k, v), (q,), (torch.ones_like(q),)),
    "jvp_compiled": lambda f, q, k, v: torch.compile(lambda q, t: torch.func.jvp(lambda q: f(q, k, v), (q,), (t,)),
                                                     backend="aot_eager")(q, torch.ones_like(q)),
    "forward_ad": lambda f, q, k, v: _dual_forward(f, q, k, v, torch.ones_like(q)),
    "forward_ad_compiled": lambda f, q, k, v: _dual_forward(torch.compile(f, backend="aot_eager"), q, k, v,
                                                            torch.ones_like(q)),
}


@pytest.mark.parametrize("transform", list(TRANSFORMS))
def test_function_transforms_and_forward_ad_are_refused_by_name(transform):
    """fa3nn has no forward-mode derivative and its eager autograd.Function no functorch support: torch.func
    transforms and forward-mode AD are refused with a message naming fa3nn and what to use instead. Before, eager
    calls failed with torch's generic autograd.Function message (about setup_context / a jvp staticmethod), and
    compiled ones returned a zero (jvp) or missing (dual tensors) tangent without a word: the custom op's autograd
    runs its no-grad forward when no input requires grad."""
    torch._dynamo.reset()
    q, k, v = random_qkv(1, 6, 7, 2, 1, 8, torch.float64)

    def f(q, k, v):
        return fa3nn.flash_attn_func(q, k, v, causal=True, backend="reference")

    message = ("fa3nn attention does not support torch.func transforms (vmap, grad, jvp, jacrev, jacfwd) or "
               "forward-mode AD")
    with pytest.raises(Exception, match=re.escape(message)):
        TRANSFORMS[transform](f, q, k, v)
