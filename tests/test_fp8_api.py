"""FP8 through the public API: the `fa3nn::fwd_fp8` custom op (opcheck, torch.compile), FlashAttentionV3(fp8=...)
with its per-layer state (state_dict, training updates, activation checkpointing), the functions' fp8=, explain,
and patch_hf's per-layer recipes."""

import copy
import io
import pickle
import warnings

import pytest
import torch
from torch.utils.checkpoint import checkpoint

import fa3nn
from fa3nn.fp8 import (
    DelayedScalingState,
    HadamardRotation,
    attention_fp8,
    make_state,
    quantize_qkv,
    recipe_arguments,
)
from fa3nn.fp8.backward import restore as fp8_restore
from fa3nn.masks import Window
from fa3nn.ops import attention_forward_fp8

RECIPES = {
    "per_tile_incoherent": fa3nn.PerTileScaling(),
    "per_tile": fa3nn.PerTileScaling(block_q=64, block_k=32, incoherent=False),
    "current": fa3nn.CurrentScaling(),
    "delayed": fa3nn.DelayedScaling(amax_history_len=4),
}


def bf16_qkv(batch=2, seqlen_q=70, seqlen_k=90, nheads=4, nheads_kv=2, headdim=64, requires_grad=False):
    q = torch.randn(batch, seqlen_q, nheads, headdim).to(torch.bfloat16)
    k, v = (torch.randn(batch, seqlen_k, nheads_kv, headdim).to(torch.bfloat16) for _ in range(2))
    return [t.requires_grad_(requires_grad) for t in (q, k, v)]


def emulated(recipe, state, q, k, v, causal=False, cu=None, max_seqlen=None):
    """The FP8 emulation called directly: what every public path must reproduce bit for bit."""
    quantized = quantize_qkv(q.detach(), k.detach(), v.detach(), recipe, state, cu, cu, max_seqlen, max_seqlen)
    return attention_fp8(quantized, q.shape[-1] ** -0.5, Window.from_args(causal, (-1, -1)), 0.0, cu, cu,
                         out_dtype=q.dtype)


# --- the custom op ----------------------------------------------------------------------------------------------


def op_args(recipe_name, varlen, requires_grad=True):
    recipe = RECIPES[recipe_name]
    state = make_state(recipe, 1)
    if varlen:
        q, k, v = (torch.randn(total, heads, 32).to(torch.bfloat16).requires_grad_(requires_grad)
                   for total, heads in ((40, 4), (40, 2), (40, 2)))
        cu = torch.tensor([0, 17, 40], dtype=torch.int32)
        head = (q, k, v, cu, cu, 23, 23)
    else:
        q, k, v = bf16_qkv(2, 33, 47, 4, 2, 32, requires_grad)
        head = (q, k, v, None, None, 33, 47)
    if recipe_name == "delayed":  # a started history: the op gets per-tensor scales
        state.observe(torch.tensor([3.0, 4.0, 5.0]))
        state.update()
    a = recipe_arguments(recipe, state, q, k, v)
    return (*head, 32**-0.5, -1, 0, 0.0, False, "reference", a["block_q"], a["block_k"], a["rotation"],
            a["tensor_scales"])


@pytest.mark.parametrize("recipe_name", ["per_tile_incoherent", "delayed"])
@pytest.mark.parametrize("varlen", [False, True])
@pytest.mark.parametrize("from_quantized", [False, True])
def test_opcheck_fwd_fp8(recipe_name, varlen, from_quantized):
    torch.library.opcheck(attention_forward_fp8, (*op_args(recipe_name, varlen), False, 0, from_quantized))


def test_opcheck_fwd_fp8_fast_exp2():
    torch.library.opcheck(attention_forward_fp8, (*op_args("per_tile_incoherent", False), True))


@pytest.mark.parametrize("varlen", [False, True])
def test_op_returns_the_emulation_and_the_amax(varlen):
    """The op's out, lse and amax are the emulation's on the PyTorch quantization's tensors; with
    backward_from_quantized it also returns those e4m3 Q and K (bits as uint8) and descales, else empty tensors."""
    args = op_args("per_tile_incoherent", varlen=varlen, requires_grad=False)
    q, k, v, cu = args[0], args[1], args[2], args[3]
    max_seqlen = args[5] if varlen else None
    out, lse, amax, *empty = attention_forward_fp8(*args)
    quantized = quantize_qkv(q, k, v, RECIPES["per_tile_incoherent"], make_state(RECIPES["per_tile_incoherent"], 1),
                             cu, cu, max_seqlen, max_seqlen)
    expect_out, expect_lse = attention_fp8(quantized, 32**-0.5, Window(-1, 0), cu_seqlens_q=cu, cu_seqlens_k=cu,
                                           out_dtype=torch.bfloat16)
    assert torch.equal(out, expect_out) and torch.equal(lse, expect_lse) and torch.equal(amax, quantized.amax)
    assert out.dtype == torch.bfloat16 and lse.dtype == torch.float32 and amax.shape == (3,)
    assert [t.numel() for t in empty] == [0, 0, 0, 0]
    *_, q8, k8, q_descale, k_descale = attention_forward_fp8(*args, False, 0, True)
    assert torch.equal(q8, quantized.q.view(torch.uint8)) and torch.equal(k8, quantized.k.view(torch.uint8))
    assert torch.equal(q_descale, quantized.q_descale) and torch.equal(k_descale, quantized.k_descale)


def test_op_outputs_past_out_and_lse_carry_no_gradient():
    """amax, q8, k8 and the descales are non-differentiable outputs even when q, k, v require grad: the descales
    feed fa3nn.fp8.backward.restore (whose out= product, in the s47 form, refused grad-requiring factors; a GPU run
    raised 'functions with out=... arguments don't support automatic differentiation' before)."""
    args = op_args("per_tile_incoherent", varlen=False)
    outputs = attention_forward_fp8(*args, False, 0, True)
    assert [t.requires_grad for t in outputs] == [True, True] + [False] * 5
    fp8_restore(outputs[3].view(torch.float8_e4m3fn), outputs[5], args[13], None, None, args[15], torch.bfloat16)


@pytest.mark.parametrize("recipe", [fa3nn.PerTileScaling(fast_exp2=True), fa3nn.CurrentScaling(fast_exp2=True)])
def test_fast_exp2_reaches_the_emulation_where_the_kernel_has_it(recipe):
    """fast_exp2 in a recipe: at head dim 128 on 256-key blocks (more than 256 keys) the emulation of the native
    kernel takes half its P8 from the linear exp2 (fa3nn.fp8.key_blocks.FAST_EXP2_EVERY), which changes the output;
    at head dim 64 (no such kernel), and for a call the native kernel refuses (a sliding window: Triton's exact exp2
    serves it on a GPU), the output is the exact exp2's, bit for bit."""
    exact_recipe = type(recipe)(**{**recipe.__dict__, "fast_exp2": False})
    for headdim, changes in ((128, True), (64, False)):
        q, k, v = bf16_qkv(1, 300, 300, 2, 2, headdim)
        fast = fa3nn.flash_attn_func(q, k, v, causal=True, fp8=recipe, backend="reference")
        exact = fa3nn.flash_attn_func(q, k, v, causal=True, fp8=exact_recipe, backend="reference")
        assert torch.equal(fast, exact) != changes, headdim
        state = make_state(recipe, 0)
        quantized = quantize_qkv(q, k, v, recipe, state)
        expect, _ = attention_fp8(quantized, headdim**-0.5, Window(-1, 0), out_dtype=q.dtype,
                                  linear_exp2_every=2 if changes else 0)
        assert torch.equal(fast, expect), headdim
    q, k, v = bf16_qkv(1, 300, 300, 2, 2, 128)
    windowed = [fa3nn.flash_attn_func(q, k, v, window_size=(64, 0), fp8=r, backend="reference")
                for r in (recipe, exact_recipe)]
    assert torch.equal(*windowed)


@pytest.mark.parametrize("backward_from", ["quantized", "inputs"])
@pytest.mark.parametrize("varlen", [False, True])
def test_fp8_backward_is_the_bf16_backward(backward_from, varlen):
    """Training: FP8 forward, then the bf16 backward (fa3nn::bwd) with the FP8 forward's out and lse, as every
    backward takes its forward's, from the Q and K the recipe's backward_from names: the quantized ones (dequantized,
    the rotation undone: fa3nn.fp8.backward.restore) or the high-precision ones. The gradients for one dout are that
    op's exactly, and within FP8's error of the bf16 path's."""
    recipe = fa3nn.PerTileScaling(block_q=64, block_k=32, backward_from=backward_from)
    torch.manual_seed(0)
    if varlen:  # two sequences, 30 and 110 long, packed
        q, k, v = (torch.randn(140, heads, 64).to(torch.bfloat16).requires_grad_() for heads in (4, 2, 2))
        cu, max_seqlen = torch.tensor([0, 30, 140], dtype=torch.int32), 110
    else:
        q, k, v = bf16_qkv(requires_grad=True)
        cu, max_seqlen = None, None
    layer = fa3nn.FlashAttentionV3(causal=True, fp8=recipe, layer_idx=3)
    out8 = layer(q, k, v, cu, cu, max_seqlen, max_seqlen)
    state = layer.fp8_state
    quantized = quantize_qkv(q.detach(), k.detach(), v.detach(), recipe, state, cu, cu, max_seqlen, max_seqlen)
    expect_out, expect_lse = attention_fp8(quantized, 64**-0.5, Window(-1, 0), cu_seqlens_q=cu, cu_seqlens_k=cu,
                                           out_dtype=q.dtype)
    assert torch.equal(out8, expect_out)
    dout = torch.randn_like(out8)
    grads8 = torch.autograd.grad(out8, (q, k, v), dout)
    rotation = state.rotation(64)
    if backward_from == "quantized":
        from_q, from_k = (fp8_restore(x8, descale, block, cu, max_seqlen, rotation, q.dtype)
                          for x8, descale, block in ((quantized.q, quantized.q_descale, 64),
                                                     (quantized.k, quantized.k_descale, 32)))
    else:
        from_q, from_k = q.detach(), k.detach()
    expect = torch.ops.fa3nn.bwd(dout, from_q, from_k, v.detach(), expect_out, expect_lse.float(), None, cu, cu,
                                 max_seqlen or q.shape[1], max_seqlen or k.shape[1], 64**-0.5, -1, 0, 0.0, False,
                                 "auto")
    out = fa3nn.flash_attn_varlen_func(q, k, v, cu, cu, max_seqlen, max_seqlen, causal=True) if varlen else (
        fa3nn.flash_attn_func(q, k, v, causal=True))
    for got, want, bf16 in zip(grads8, expect, torch.autograd.grad(out, (q, k, v), dout)):
        assert torch.equal(got, want)  # ...the backward bf16, from the named Q and K
        assert (got.float() - bf16.float()).abs().max() < 0.2 * bf16.float().abs().max()


@pytest.mark.parametrize("backward_from", ["quantized", "inputs"])
def test_fp8_training_with_sinks_gqa_and_an_empty_sequence(backward_from):
    """FP8 training through the pieces the backward's inputs come from at once: packed sequences with an empty one,
    GQA (4 query heads, 2 key heads), head dim 96 (the rotation block-diagonal) and attention sinks (applied past the
    FP8 op, so its backward gets a nonzero dlse): every gradient, the sinks' too, within FP8's error of the bf16
    path's, and "quantized" reading other Q and K than "inputs". The loss reaches lse too (ring attention's combine, a
    z-loss): the sinks' gradient through the FP8 path's lse (fa3nn.sinks.with_sinks, d lse / d sink = 1 - sigmoid(lse
    - sink)) went untested, and without it the sinks' gradient was 27% of its norm off here."""
    torch.manual_seed(1)
    cu = torch.tensor([0, 30, 30, 140, 141], dtype=torch.int32)
    q = torch.randn(141, 4, 96).to(torch.bfloat16).requires_grad_()
    k, v = (torch.randn(141, 2, 96).to(torch.bfloat16).requires_grad_() for _ in range(2))
    sinks = torch.randn(4, requires_grad=True)
    dout = torch.randn(141, 4, 96).to(torch.bfloat16)
    dlse = torch.randn(4, 141)
    grads = {}
    other = {"quantized": "inputs", "inputs": "quantized"}[backward_from]
    for name, fp8 in (("fp8", fa3nn.PerTileScaling(block_q=64, block_k=32, backward_from=backward_from)),
                      ("other", fa3nn.PerTileScaling(block_q=64, block_k=32, backward_from=other)), ("bf16", None)):
        out, lse = fa3nn.flash_attn_varlen_func(q, k, v, cu, cu, 110, 110, causal=True, fp8=fp8, sinks=sinks,
                                                return_lse=True)
        grads[name] = torch.autograd.grad((out, lse), (q, k, v, sinks), (dout, dlse))
    for got, want in zip(grads["fp8"], grads["bf16"]):
        assert torch.isfinite(got).all() and got.abs().amax() > 0
        assert (got.float() - want.float()).norm() < 0.1 * want.float().norm()
    assert not torch.equal(grads["fp8"][0], grads["other"][0])


@pytest.mark.parametrize("headdim", [64, 96, 128, 256])
def test_restore_is_the_quantized_input_in_its_basis(headdim):
    """fa3nn.fp8.backward.restore against float64 arithmetic: without a rotation (q8 * descale) rounded once to bf16,
    bit for bit, dense and packed; with one (q8 * descale) @ Rᵀ within one bf16 ulp at each row's largest entry (the
    float32 sum of the +-1 GEMM, then the scale, then one rounding), and within FP8's error of the q it came from."""
    torch.manual_seed(headdim)
    recipe = fa3nn.PerTileScaling(block_q=32, block_k=32)
    q, k, v = bf16_qkv(2, 70, 70, 4, 2, headdim)
    quantized = quantize_qkv(q, k, v, recipe, make_state(recipe, 0))
    rows = quantized.q_descale.repeat_interleave(32, dim=-1)[..., :70].transpose(1, 2).unsqueeze(-1)
    assert torch.equal(fp8_restore(quantized.q, quantized.q_descale, 32, None, None, None, torch.bfloat16),
                       (quantized.q.float() * rows).to(torch.bfloat16))
    rotation = make_state(recipe, 0).rotation(headdim)  # the one quantize_qkv applied
    got = fp8_restore(quantized.q, quantized.q_descale, 32, None, None, rotation, torch.bfloat16).double()
    exact = (quantized.q.double() * rows.double()) @ rotation.double().T
    ulp = torch.finfo(torch.bfloat16).eps * exact.abs().amax(-1, keepdim=True)
    assert ((got - exact).abs() <= ulp).all(), ((got - exact).abs() / ulp).max()
    assert (got - q.double()).norm() < 0.1 * q.double().norm()  # back in q's basis (R, not Rᵀ: O(1) off)
    cu = torch.tensor([0, 5, 70], dtype=torch.int32)
    packed = quantize_qkv(q[0], k[0], v[0], recipe, make_state(recipe, 0), cu, cu, 65, 65)
    tile = torch.cat([torch.arange(5) // 32, 3 + torch.arange(65) // 32])  # sequence * tiles + tile, 3 tiles each
    rows = packed.q_descale.transpose(1, 2).reshape(6, 4)[tile].unsqueeze(-1)
    assert torch.equal(fp8_restore(packed.q, packed.q_descale, 32, cu, 65, None, torch.bfloat16),
                       (packed.q.float() * rows).to(torch.bfloat16))
    got = fp8_restore(packed.q, packed.q_descale, 32, cu, 65, rotation, torch.bfloat16).double()
    exact = (packed.q.double() * rows.double()) @ rotation.double().T
    assert ((got - exact).abs() <= torch.finfo(torch.bfloat16).eps * exact.abs().amax(-1, keepdim=True)).all()


def test_restore_is_its_definition_under_autocast():
    """restore's definition is a float32 product with the rotation's +-1 matrix, rounded once: under a caller's
    autocast (its CPU bf16 one here) the matmul was cast to bf16 (0.125 off at these values). fa3nn::fwd_fp8's
    backward runs it with autocast off; restore called directly must not depend on the caller's autocast either."""
    torch.manual_seed(0)
    x8 = (torch.randn(2, 37, 3, 64) * 8).to(torch.float8_e4m3fn)
    descale = torch.rand(2, 3, 3)
    rotation = make_state(fa3nn.PerTileScaling(), 0).rotation(64)
    want = fp8_restore(x8, descale, 16, None, None, rotation, torch.bfloat16)
    with torch.autocast("cpu", torch.bfloat16):
        got = fp8_restore(x8, descale, 16, None, None, rotation, torch.bfloat16)
    assert torch.equal(got, want)


def test_restore_on_cuda_without_triton_is_the_definition(monkeypatch):
    """restore's default (kernel=None) is the Triton pass on CUDA tensors, but triton is an optional dependency
    (fa3nn[triton]) and the FP8 emulation serves GPU calls without it: there the backward must take the PyTorch
    definition, as it did before the pass became the default, not fail importing triton. A CUDA x8 on a machine
    without triton is stood in for: is_cuda reports True, the Triton backend says triton is not installed and the
    pass's module cannot be imported."""
    import sys

    import fa3nn.backends.triton as triton_backend

    torch.manual_seed(0)
    x8 = (torch.randn(2, 37, 3, 64) * 8).to(torch.float8_e4m3fn)
    descale = torch.rand(2, 3, 3)
    rotation = make_state(fa3nn.PerTileScaling(), 0).rotation(64)
    want = fp8_restore(x8, descale, 16, None, None, rotation, torch.bfloat16, kernel=False)
    monkeypatch.setattr(triton_backend, "_TRITON_INSTALLED", False)
    monkeypatch.setitem(sys.modules, "fa3nn.backends.triton.dequantize", None)  # importing it fails, as without triton
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
    got = fp8_restore(x8, descale, 16, None, None, rotation, torch.bfloat16)
    monkeypatch.undo()
    assert torch.equal(got, want)


@pytest.mark.parametrize("recipe_name", ["per_tile_incoherent", "current", "delayed"])
def test_compile_fullgraph_module_with_fp8(recipe_name):
    """torch.compile(fullgraph=True) over a FlashAttentionV3 with an FP8 recipe: no graph break, the same outputs,
    gradients and (delayed scaling) the same history and scales as eager, over three training steps."""
    torch._dynamo.reset()
    eager = fa3nn.FlashAttentionV3(causal=True, fp8=RECIPES[recipe_name], layer_idx=2).train()
    module = fa3nn.FlashAttentionV3(causal=True, fp8=RECIPES[recipe_name], layer_idx=2).train()
    compiled = torch.compile(module, fullgraph=True, backend="aot_eager")
    for step in range(3):
        q, k, v = (t.detach().mul(step + 1).requires_grad_() for t in bf16_qkv(1, 40, 40, 4, 2, 32))
        got = compiled(q, k, v)
        got_grads = torch.autograd.grad(got.float().sum(), (q, k, v))
        expect = eager(q, k, v)
        expect_grads = torch.autograd.grad(expect.float().sum(), (q, k, v))
        assert torch.equal(got, expect), f"step {step}"
        assert all(torch.equal(a, b) for a, b in zip(got_grads, expect_grads))
        if recipe_name == "delayed":
            fa3nn.sync_amax([module, eager])
            assert torch.equal(module.state_dict()["fp8_state.scale"], eager.state_dict()["fp8_state.scale"])
    if recipe_name == "delayed":
        assert torch.equal(module.fp8_state.amax_history, eager.fp8_state.amax_history)
        assert (module.fp8_state.amax_history[:3] > 0).all() and (module.fp8_state.amax_history[3] == 0).all()


def _checkpointed(wrapping: str, attn):
    """attn under activation checkpointing and torch.compile, `wrapping` saying which wraps which."""
    from torch.utils.checkpoint import checkpoint

    if wrapping == "compile(checkpoint)":
        return torch.compile(lambda q, k, v: checkpoint(attn, q, k, v, use_reentrant=False), fullgraph=True,
                             backend="aot_eager")
    compiled = torch.compile(attn, fullgraph=True, backend="aot_eager")
    reentrant = wrapping == "checkpoint(compile), reentrant"
    return lambda q, k, v: checkpoint(compiled, q, k, v, use_reentrant=reentrant)


WRAPPINGS = ["compile(checkpoint)", "checkpoint(compile)", "checkpoint(compile), reentrant"]


def _check_checkpointed_and_compiled(wrapping, device, dtype, backend, shape):
    torch._dynamo.reset()
    attn, ref = (fa3nn.FlashAttentionV3(causal=True, fp8=fa3nn.DelayedScaling(), backend=backend,
                                        deterministic=True).train().to(device) for _ in range(2))
    wrapped = _checkpointed(wrapping, attn)
    for step in range(4):
        q, k, v = (torch.randn(*shape, device=device).mul(step + 1).to(dtype).requires_grad_() for _ in range(3))
        wrapped(q, k, v).float().sum().backward()
        expect = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        ref(*expect).float().sum().backward()
        for name, got, want in zip("qkv", (q, k, v), expect):
            torch.testing.assert_close(got.grad, want.grad, rtol=0, atol=0, msg=f"step {step} d{name}")
        fa3nn.sync_amax([attn, ref])
    assert torch.equal(attn.fp8_state.amax_history, ref.fp8_state.amax_history)
    assert (attn.fp8_state.amax_history[:4] > 0).all() and (attn.fp8_state.amax_history[4] == 0).all()
    assert torch.equal(attn.fp8_state.scale, ref.fp8_state.scale)


@pytest.mark.parametrize("wrapping", WRAPPINGS)
def test_delayed_scaling_checkpointed_and_compiled_matches_eager(wrapping):
    """Activation checkpointing and torch.compile around the same DelayedScaling layer, against the eager layer
    without checkpointing, over four steps. The recompute was recognized in Python, a question torch.compile answers
    once at trace time: compile(checkpoint) quantized its recompute with the scale the forward had already updated
    (s58's probe: dq 0.38-0.73 relative off from the second step), checkpoint(compile) also recorded each step's amax
    twice. Now only sync_amax changes the scales, so a recompute reads what its forward read: gradients, history and
    scales bitwise equal, from a fresh layer (fullgraph)."""
    _check_checkpointed_and_compiled(wrapping, "cpu", torch.float32, "reference", (1, 24, 2, 16))


@pytest.mark.gpu
@pytest.mark.parametrize("wrapping", WRAPPINGS)
def test_delayed_scaling_checkpointed_and_compiled_matches_eager_gpu(wrapping):
    """The same on the GPU's FP8 path (auto: the fused quantization pass and the native or Triton FP8 forward, the
    bf16 backward, deterministic so that the comparison is bitwise)."""
    _check_checkpointed_and_compiled(wrapping, "cuda", torch.bfloat16, "auto", (2, 300, 4, 128))


@pytest.mark.parametrize("wrapping", ["checkpoint", *WRAPPINGS[:2]])
def test_delayed_scaling_layer_run_twice_before_its_backward(wrapping):
    """A checkpointed layer called twice before one backward (a shared layer, two inputs through one model for one
    loss): the recompute of the first call quantized with the scales the second call had left (s59 probe: relative
    gradient error 1.0 from the second step eagerly, a RuntimeError under compile(checkpoint)). Scales now move only
    in sync_amax, so both recomputes read what their forwards read."""
    torch._dynamo.reset()
    attn, ref = (fa3nn.FlashAttentionV3(causal=True, fp8=fa3nn.DelayedScaling(amax_compute_algo="most_recent"),
                                        backend="reference").train() for _ in range(2))
    wrapped = (lambda *qkv: checkpoint(attn, *qkv, use_reentrant=False)) if wrapping == "checkpoint" else \
        _checkpointed(wrapping, attn)
    for step in range(3):
        generator = torch.Generator().manual_seed(step)
        first, second = ([torch.randn(1, 16, 2, 16, generator=generator) * scale for _ in range(3)] for scale in (3, 1))
        got, want = ([[t.clone().requires_grad_() for t in qkv] for qkv in (first, second)] for _ in range(2))
        (wrapped(*got[0]).sum() + wrapped(*got[1]).sum()).backward()
        (ref(*want[0]).sum() + ref(*want[1]).sum()).backward()
        for a, b in zip(got[0] + got[1], want[0] + want[1]):
            torch.testing.assert_close(a.grad, b.grad, rtol=0, atol=0, msg=f"step {step}")
        fa3nn.sync_amax([attn, ref])
    assert torch.equal(attn.fp8_state.amax_history, ref.fp8_state.amax_history)
    assert torch.equal(attn.fp8_state.scale, ref.fp8_state.scale)


def test_delayed_scaling_without_sync_amax_warns_once():
    """Only sync_amax folds the amaxes into the history: a layer trained without it keeps its scales (before the
    first update, each call scales from its own amax), so after UNSYNCED_FORWARDS training forwards it says so,
    once; sync_amax restarts the count."""
    from fa3nn.fp8.state import UNSYNCED_FORWARDS

    attn = fa3nn.FlashAttentionV3(fp8="delayed", backend="reference").train()
    q, k, v = (torch.randn(1, 8, 1, 16) for _ in range(3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(UNSYNCED_FORWARDS - 1):
            attn(q, k, v)
        fa3nn.sync_amax(attn)
        for _ in range(UNSYNCED_FORWARDS - 1):
            attn(q, k, v)
    with pytest.warns(UserWarning, match=r"1000 training forwards without fa3nn.sync_amax\(model\)") as caught:
        attn(q, k, v)
        attn(q, k, v)
    assert len(caught) == 1 and caught[0].filename == __file__
    assert (attn.fp8_state.amax_history[1:] == 0).all()  # one sync, one row


# --- FlashAttentionV3 ----------------------------------------------------------------------------------------------


def test_module_state_matches_the_recipe():
    assert fa3nn.FlashAttentionV3().fp8_state is None and fa3nn.FlashAttentionV3().fp8_recipe is None
    assert fa3nn.FlashAttentionV3(fp8="current").fp8_state is None
    assert isinstance(fa3nn.FlashAttentionV3(fp8=True).fp8_recipe, fa3nn.PerTileScaling)
    assert list(fa3nn.FlashAttentionV3(fp8="per_tile").state_dict()) == ["fp8_state.hadamard_signs"]
    assert set(fa3nn.FlashAttentionV3(fp8="delayed").state_dict()) == {
        "fp8_state.amax_history", "fp8_state.scale", "fp8_state.skipped_updates"}
    a, b = (fa3nn.FlashAttentionV3(fp8="per_tile", layer_idx=i).fp8_state.hadamard_signs for i in (0, 1))
    assert not torch.equal(a, b)  # layers differ
    assert torch.equal(a, HadamardRotation(0, 0).hadamard_signs)
    with pytest.raises(ValueError, match="unknown FP8 recipe name 'fp8'"):
        fa3nn.FlashAttentionV3(fp8="fp8")


@pytest.mark.parametrize("recipe_name", list(RECIPES))
def test_module_equals_the_emulation_dense_and_varlen(recipe_name):
    recipe = RECIPES[recipe_name]
    attn = fa3nn.FlashAttentionV3(causal=True, fp8=recipe, layer_idx=5).eval()
    q, k, v = bf16_qkv(2, 60, 60)
    assert torch.equal(attn(q, k, v), emulated(recipe, attn.fp8_state, q, k, v, causal=True)[0])
    cu = torch.tensor([0, 60, 120], dtype=torch.int32)
    packed = [t.reshape(120, *t.shape[2:]) for t in (q, k, v)]
    expect = emulated(recipe, attn.fp8_state, *packed, causal=True, cu=cu, max_seqlen=60)[0]
    assert torch.equal(attn(*packed, cu, cu, 60, 60), expect)


@pytest.mark.parametrize("backward_from", ["quantized", "inputs"])
def test_incoherent_fp8_does_not_depend_on_the_inputs_memory_layout(backward_from):
    """The Hadamard rotation before quantizing is a float32 GEMM whose CPU summation order followed the input's strides:
    a K that is a (batch, nheads, seqlen, d) transpose (Hugging Face's, with use_cache=True) got other e4m3 values
    than its contiguous copy, so the loss of a patched model moved with use_cache / gradient checkpointing (seeds 0-4
    here: 4 of 5 outputs differed)."""
    recipe = fa3nn.PerTileScaling(backward_from=backward_from)
    attn = fa3nn.FlashAttentionV3(fp8=recipe, layer_idx=1).train()
    torch.manual_seed(0)
    strided = [torch.randn(2, 2, 150, 32).to(torch.bfloat16).transpose(1, 2).requires_grad_() for _ in range(3)]
    dense = [t.detach().contiguous().requires_grad_() for t in strided]
    outs = [attn(*qkv) for qkv in (strided, dense)]
    assert torch.equal(outs[0], outs[1])
    dout = torch.randn_like(outs[1])
    for out in outs:
        out.backward(dout)
    for a, b in zip(strided, dense):
        assert torch.equal(a.grad, b.grad)


@pytest.mark.parametrize("recipe_name", ["per_tile_incoherent", "delayed"])
def test_module_state_dict_round_trip(recipe_name):
    """A module restored from a state_dict quantizes exactly like the saved one, even when built with another
    layer_idx (the Hadamard signs come from the checkpoint) or an untouched history."""
    recipe = RECIPES[recipe_name]
    trained = fa3nn.FlashAttentionV3(fp8=recipe, layer_idx=3).train()
    for step in range(3):
        trained(*(t * (step + 1) for t in bf16_qkv()))
        fa3nn.sync_amax(trained)
    restored = fa3nn.FlashAttentionV3(fp8=recipe, layer_idx=0)
    restored.load_state_dict(trained.state_dict())
    for name, value in trained.state_dict().items():
        assert torch.equal(restored.state_dict()[name], value), name
    q, k, v = bf16_qkv()
    trained.eval(), restored.eval()
    assert torch.equal(restored(q, k, v), trained(q, k, v))
    assert not torch.equal(fa3nn.FlashAttentionV3(fp8=recipe, layer_idx=0).eval()(q, k, v), trained(q, k, v))


def test_casting_the_model_keeps_delayed_state_float32():
    attn = fa3nn.FlashAttentionV3(fp8="delayed").to(torch.bfloat16)
    assert {t.dtype for t in attn.fp8_state.buffers()} == {torch.float32, torch.int64}
    # the pending amax and flag: this rank's own, plain attributes (not buffers), which casts leave alone too
    assert (attn.fp8_state.pending_amax.dtype, attn.fp8_state.pending.dtype) == (torch.float32, torch.bool)
    attn.train()(*bf16_qkv())
    fa3nn.sync_amax(attn)
    q_amax = attn.fp8_state.amax_history[0, 0].item()
    assert attn.fp8_state.scale[0].item() == torch.tensor(448.0 / q_amax).item()  # an fp32 scale, not bf16


def test_casting_the_model_leaves_delayed_state_bit_for_bit():
    """.half() used to cast the float32 buffers to fp16 and back: a V scale of 1.2e5 became inf and the output all
    zeros, without a word; .to(torch.bfloat16) rounded every scale to 8 significant bits."""
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 64, 2, 16), torch.randn(1, 64, 2, 16), torch.randn(1, 64, 2, 16) * 1e-3
    trained = fa3nn.FlashAttentionV3(fp8="delayed").train()
    for _ in range(2):
        trained(q, k, v)
        fa3nn.sync_amax(trained)
    trained.eval()
    assert trained.fp8_state.scale[2] > torch.finfo(torch.float16).max  # the scale fp16 cannot hold
    for cast in (torch.nn.Module.half, torch.nn.Module.bfloat16, torch.nn.Module.double,
                 lambda module: module.to(torch.bfloat16), lambda module: module.to("cpu", torch.float16)):
        casted = cast(copy.deepcopy(trained))
        for name, value in trained.fp8_state.named_buffers():
            assert torch.equal(getattr(casted.fp8_state, name), value) and value.dtype == getattr(
                casted.fp8_state, name).dtype, name
    half_qkv = (q.half(), k.half(), v.half())
    out = copy.deepcopy(trained).half()(*half_qkv)
    assert torch.isfinite(out).all() and out.abs().max() > 0
    assert torch.equal(out, trained(*half_qkv))


def test_delayed_module_pickles_whole():
    """The state's load_state_dict post hook was a lambda, which neither pickle nor torch.save can write."""
    trained = fa3nn.FlashAttentionV3(fp8=fa3nn.DelayedScaling(amax_history_len=4)).train()
    for step in range(2):
        trained(*(t * (step + 1) for t in bf16_qkv(1, 32, 32, 2, 2, 32)))
        fa3nn.sync_amax(trained)
    saved = io.BytesIO()
    torch.save(trained, saved)
    saved.seek(0)
    q, k, v = bf16_qkv(1, 32, 32, 2, 2, 32)
    for loaded in (pickle.loads(pickle.dumps(trained)), torch.load(saved, weights_only=False)):
        for name, value in trained.state_dict().items():
            assert torch.equal(loaded.state_dict()[name], value), name
        assert torch.equal(loaded.eval()(q, k, v), trained.eval()(q, k, v))
        loaded.load_state_dict(trained.state_dict())  # the hook came along: started is read again
        assert loaded.fp8_state._started is None and loaded.fp8_state.started


def test_load_state_dict_assign_rebuilds_the_rotation():
    """assign=True puts in new signs tensors whose _version (0) equals the old one's: a rotation cached on
    (headdim, device, _version) was reused, so the layer went on with its old signs."""
    q, k, v = bf16_qkv()
    layer, other = (fa3nn.FlashAttentionV3(fp8="per_tile", layer_idx=i).eval() for i in (0, 5))
    before, want = layer(q, k, v), other(q, k, v)
    assert not torch.equal(before, want)
    layer.load_state_dict(other.state_dict(), assign=True)
    assert torch.equal(layer(q, k, v), want)


def test_module_training_updates_delayed_state_eval_does_not():
    """A training forward observes its amax and leaves history and scales to sync_amax; an eval forward records
    nothing."""
    attn = fa3nn.FlashAttentionV3(fp8="delayed").train()
    q, k, v = bf16_qkv()
    attn(q, k, v)
    assert attn.fp8_state.pending and (attn.fp8_state.amax_history == 0).all()  # observed, not folded
    fa3nn.sync_amax(attn)
    assert attn.fp8_state.amax_history[0].tolist() == [t.abs().max().item() for t in (q, k, v)]
    scale = attn.fp8_state.scale.clone()
    attn(q * 2, k, v)
    assert torch.equal(attn.fp8_state.scale, scale)
    fa3nn.sync_amax(attn)
    assert attn.fp8_state.amax_history[0, 0].item() == 2 * q.abs().max().item()
    history = attn.fp8_state.amax_history.clone()
    attn.eval()(q * 4, k, v)
    assert torch.equal(attn.fp8_state.amax_history, history) and not attn.fp8_state.pending


def test_switching_the_recipe_keeps_what_state_applies():
    """Assigning a layer's fp8_recipe left its state as it was: after DelayedScaling, CurrentScaling or
    PerTileScaling(incoherent=False) raised "copy_(): argument 'other' ... must be Tensor, not NoneType" at the next
    training forward, PerTileScaling() and per_tile -> delayed a TypeError about make_state, and
    DelayedScaling(margin=2) kept scaling with the old recipe's margin 0 (scale 133 where 448 / 4 / amax is 33)."""
    q, k, v = bf16_qkv()
    attn = fa3nn.FlashAttentionV3(fp8=fa3nn.DelayedScaling(amax_history_len=4)).train()
    for step in range(3):
        attn(q * (step + 1), k, v)
        fa3nn.sync_amax(attn)
    history = attn.fp8_state.amax_history.clone()
    attn.fp8_recipe = fa3nn.DelayedScaling(amax_history_len=2, margin=2, amax_compute_algo="most_recent")
    state = attn.fp8_state
    assert state.recipe is attn.fp8_recipe and torch.equal(state.amax_history, history[:2])  # the newest rows
    assert torch.equal(state.scale, (448.0 / 4) / history[0])  # rescaled from the kept history at once
    attn(q * 5, k, v)
    fa3nn.sync_amax(attn)
    assert state.amax_history[:, 0].tolist() == [(q * 5).abs().max().item(), (q * 3).abs().max().item()]
    assert torch.equal(state.scale, (448.0 / 4) / state.amax_history[0])
    for fp8 in ("current", fa3nn.PerTileScaling(incoherent=False), "per_tile", None, "delayed"):
        attn.fp8_recipe = fp8
        assert attn.fp8_recipe == fa3nn.fp8.as_recipe(fp8) and f"fp8={attn.fp8_recipe!r}" in repr(attn)
        assert type(attn.fp8_state) is type(make_state(attn.fp8_recipe, 0))
        out = attn(q, k, v)  # training forward
        if fp8 != "delayed":
            assert torch.equal(out, fa3nn.flash_attn_func(q, k, v, fp8=fp8))
    assert attn.fp8_state.recipe == fa3nn.DelayedScaling() and attn.fp8_state.amax_history[1:].eq(0).all()
    # PerTileScaling's Hadamard signs stay when the new recipe draws the same ones (e.g. loaded from a checkpoint)
    attn = fa3nn.FlashAttentionV3(fp8="per_tile", layer_idx=0)
    attn.load_state_dict(fa3nn.FlashAttentionV3(fp8="per_tile", layer_idx=3).state_dict())
    signs = attn.fp8_state.hadamard_signs
    attn.fp8_recipe = fa3nn.PerTileScaling(block_q=64)
    assert attn.fp8_state.hadamard_signs is signs
    attn.fp8_recipe = fa3nn.PerTileScaling(seed=1)
    assert torch.equal(attn.fp8_state.hadamard_signs, HadamardRotation(1, 0).hadamard_signs)
    with pytest.raises(ValueError, match="unknown FP8 recipe name 'fp9'"):
        attn.fp8_recipe = "fp9"


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_activation_checkpointing_records_the_amax_once(use_reentrant):
    """torch.utils.checkpoint recomputes the forward inside the backward; the recompute must not push a second
    history row, nor move the scale the next step uses. Same history, scale and gradients as without it."""
    runs = []
    for checkpointed in (False, True):
        torch.manual_seed(0)
        attn = fa3nn.FlashAttentionV3(causal=True, fp8=fa3nn.DelayedScaling(amax_history_len=8)).train()

        def block(q, k, v, attn=attn):  # an op after attention saves a tensor: the recompute runs past attention
            return attn(q, k, v).float().square()

        grads = []
        for step in range(2):
            q, k, v = (t.detach().mul(step + 1).requires_grad_() for t in bf16_qkv())
            out = checkpoint(block, q, k, v, use_reentrant=use_reentrant) if checkpointed else block(q, k, v)
            out.sum().backward()  # reentrant checkpoint does not support autograd.grad
            fa3nn.sync_amax(attn)
            grads += [q.grad, k.grad, v.grad]
        runs.append((attn.fp8_state.amax_history.clone(), attn.fp8_state.scale.clone(), grads))
    (history, scale, grads), (history_ckpt, scale_ckpt, grads_ckpt) = runs
    assert (history[:2] > 0).all() and (history[2:] == 0).all()  # two steps, two rows
    assert torch.equal(history_ckpt, history) and torch.equal(scale_ckpt, scale)
    assert all(torch.equal(a, b) for a, b in zip(grads_ckpt, grads))


# --- the functions, explain --------------------------------------------------------------------------------------


@pytest.mark.parametrize("fp8", ["per_tile", True, fa3nn.PerTileScaling(seed=7), "current"])
def test_functions_take_stateless_recipes(fp8):
    recipe = fa3nn.fp8.as_recipe(fp8)
    state = make_state(recipe, 0)  # layer 0 of the recipe's seed: what a call without a module uses
    q, k, v = bf16_qkv()
    out, lse = fa3nn.flash_attn_func(q, k, v, fp8=fp8, return_lse=True)
    expect_out, expect_lse = emulated(recipe, state, q, k, v)
    assert torch.equal(out, expect_out) and torch.equal(lse, expect_lse)
    cu = torch.tensor([0, 33, 70], dtype=torch.int32)
    packed = [t[0].contiguous() for t in bf16_qkv(1, 70, 70)]
    got = fa3nn.flash_attn_varlen_func(*packed, cu, cu, 37, 37, causal=True, fp8=fp8)
    assert torch.equal(got, emulated(recipe, state, *packed, causal=True, cu=cu, max_seqlen=37)[0])


def test_compile_fullgraph_functions_with_fp8():
    torch._dynamo.reset()
    q, k, v = bf16_qkv(1, 40, 40, 4, 2, 32)
    cu = torch.tensor([0, 15, 40], dtype=torch.int32)

    def f(q, k, v):
        dense = fa3nn.flash_attn_func(q, k, v, causal=True, fp8=True)
        packed = fa3nn.flash_attn_varlen_func(q[0], k[0], v[0], cu, cu, 25, 25, fp8="current")
        return dense, packed

    for got, expect in zip(torch.compile(f, fullgraph=True, backend="aot_eager")(q, k, v), f(q, k, v)):
        assert torch.equal(got, expect)


def test_functions_refuse_delayed_scaling():
    q, k, v = bf16_qkv()
    with pytest.raises(ValueError, match=r"needs state.*use fa3nn.FlashAttentionV3\(fp8=...\)"):
        fa3nn.flash_attn_func(q, k, v, fp8=fa3nn.DelayedScaling())
    cu = torch.tensor([0, 70], dtype=torch.int32)
    with pytest.raises(ValueError, match=r"needs state"):
        fa3nn.flash_attn_varlen_func(q[0], k[0, :70], v[0, :70], cu, cu, 70, 70, fp8="delayed")


def test_explain_names_the_fp8_path():
    q, k, v = bf16_qkv()
    explanation = fa3nn.explain(q, k, v, causal=True, fp8="per_tile")
    assert explanation.forward == "fp8 emulation (reference)"
    assert explanation.backward == fa3nn.explain(q, k, v, causal=True).backward  # the bf16 backward
    assert "needs a Hopper GPU" in explanation.forward_refusals["hopper"]
    assert "forward: fp8 emulation (reference)" in str(explanation)
    assert fa3nn.explain(q, k, v, fp8="per_tile", backend="triton").forward == "none"
    for backend in ("triton", "hopper"):  # forced backends never run bf16 in place of FP8
        with pytest.raises(fa3nn.UnsupportedCall, match=rf"backend='{backend}' cannot run this FP8 forward call"):
            fa3nn.flash_attn_func(q, k, v, fp8="current", backend=backend)
    assert torch.equal(fa3nn.flash_attn_func(q, k, v, fp8="current", backend="reference"),
                       fa3nn.flash_attn_func(q, k, v, fp8="current"))


# --- patch_hf ------------------------------------------------------------------------------------------------------


def test_patch_hf_fp8_per_layer_state_and_sync_amax():
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        vocab_size=96, hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, attn_implementation="eager",
    )
    model = fa3nn.patch_hf(transformers.LlamaForCausalLM(config).to(torch.bfloat16), fp8="per_tile")
    layers = [layer.self_attn.fa3nn_attention for layer in model.model.layers]
    assert [layer.layer_idx for layer in layers] == [0, 1, 2]
    signs = [model.state_dict()[f"model.layers.{i}.self_attn.fa3nn_attention.fp8_state.hadamard_signs"]
             for i in range(3)]
    assert not torch.equal(signs[0], signs[1]) and not torch.equal(signs[1], signs[2])

    model = fa3nn.patch_hf(model, fp8=fa3nn.DelayedScaling(amax_history_len=4)).train()
    ids = torch.randint(0, 96, (2, 16))
    model(ids, labels=ids).loss.backward()
    assert fa3nn.sync_amax(model) == 0  # single process: no reduction; every layer updated from its own amax
    for i, layer in enumerate(model.model.layers):
        state = layer.self_attn.fa3nn_attention.fp8_state
        assert isinstance(state, DelayedScalingState)
        assert (state.amax_history[0] > 0).all() and (state.amax_history[1:] == 0).all(), f"layer {i}"


def test_sync_amax_callback_folds_once_per_optimizer_step(tmp_path):
    """transformers' Trainer with fa3nn.sync_amax_callback(): 3 optimizer steps of 2 accumulated micro-batches each
    give 3 history rows per layer (the same Trainer without the callback gives none)."""
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        vocab_size=96, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64,
    )
    ids = torch.randint(0, 96, (12, 16), generator=torch.Generator().manual_seed(0))
    rows = [{"input_ids": row, "labels": row} for row in ids]
    args = transformers.TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=2,
                                          gradient_accumulation_steps=2, max_steps=3, report_to=[], use_cpu=True,
                                          save_strategy="no", logging_strategy="no", dataloader_num_workers=0)
    histories = {}
    for callbacks in ([fa3nn.sync_amax_callback()], []):
        torch.manual_seed(0)
        model = fa3nn.patch_hf(transformers.LlamaForCausalLM(config), fp8=fa3nn.DelayedScaling(amax_history_len=4))
        transformers.Trainer(model=model, args=args, train_dataset=rows, callbacks=callbacks).train()
        histories[bool(callbacks)] = [layer.self_attn.fa3nn_attention.fp8_state.amax_history for layer in
                                      model.model.layers]
    for history in histories[True]:
        assert (history[:3] > 0).all() and (history[3] == 0).all()
    assert all((history == 0).all() for history in histories[False])


def test_save_pretrained_keeps_the_amax_history_for_a_patched_model(tmp_path):
    """What the README says of DelayedScaling and save_pretrained: the history is in the saved file; from_pretrained
    into an unpatched model drops it (no layer holds it yet), and loading the file's state_dict into the model after
    patch_hf restores it exactly."""
    transformers = pytest.importorskip("transformers")
    safetensors_torch = pytest.importorskip("safetensors.torch")
    config = transformers.LlamaConfig(
        vocab_size=96, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64,
    )
    recipe = fa3nn.DelayedScaling(amax_history_len=4)
    model = fa3nn.patch_hf(transformers.LlamaForCausalLM(config), fp8=recipe).train()
    ids = torch.randint(0, 96, (2, 16))
    for _ in range(2):
        model(ids, labels=ids).loss.backward()
        fa3nn.sync_amax(model)
    histories = {name: buffer.clone() for name, buffer in model.named_buffers() if name.endswith("amax_history")}
    assert len(histories) == 2 and all((h[:2] > 0).all() for h in histories.values())
    model.save_pretrained(tmp_path)

    resumed = transformers.LlamaForCausalLM.from_pretrained(tmp_path)
    assert not any(name.endswith("amax_history") for name, _ in resumed.named_buffers())
    resumed = fa3nn.patch_hf(resumed, fp8=recipe)
    assert all((buffer == 0).all() for name, buffer in resumed.named_buffers() if name.endswith("amax_history"))
    missing, unexpected = resumed.load_state_dict(safetensors_torch.load_file(tmp_path / "model.safetensors"),
                                                  strict=False)
    assert not unexpected and not any("fp8_state" in name for name in missing)
    for name, buffer in resumed.named_buffers():
        if name.endswith("amax_history"):
            assert torch.equal(buffer, histories[name]), name


@pytest.mark.parametrize("recipe", ["current", fa3nn.PerTileScaling(incoherent=False)], ids=["current", "per_tile"])
@pytest.mark.parametrize("name", ["q", "k", "v"])
def test_fp8_saturates_inf_and_propagates_nan(recipe, name):
    """What the README says FP8 does with non-finite inputs: a tile holding +-Inf gets scale 1 (its amax is not
    finite) and the cast saturates, so the output equals that of +-448 in its place (finite); NaN propagates as in the
    bf16 call. (The GPU pass computes its scales the same way: fa3nn.backends.triton.quantize._scale_from_amax.)"""
    q, k, v = bf16_qkv(batch=1, seqlen_q=32, seqlen_k=48, nheads=2, nheads_kv=2)
    tensors = dict(q=q, k=k, v=v)
    for value, stand_in in ((float("inf"), 448.0), (float("-inf"), -448.0)):
        poisoned, saturated = dict(tensors), dict(tensors)
        poisoned[name], saturated[name] = tensors[name].clone(), tensors[name].clone()
        poisoned[name][0, 5, 1, 7], saturated[name][0, 5, 1, 7] = value, stand_in
        out = fa3nn.flash_attn_func(**poisoned, fp8=recipe)
        assert torch.isfinite(out).all()
        assert torch.equal(out, fa3nn.flash_attn_func(**saturated, fp8=recipe))
    poisoned = dict(tensors)
    poisoned[name] = tensors[name].clone()
    poisoned[name][0, 5, 1, 7] = float("nan")
    out, bf16 = fa3nn.flash_attn_func(**poisoned, fp8=recipe), fa3nn.flash_attn_func(**poisoned)
    assert torch.equal(torch.isnan(out), torch.isnan(bf16)) and torch.isnan(out).any()


def test_restore_keeps_the_rotations_signs_per_tensor_and_version():
    """restore's +-1 matrix and c are made once per rotation tensor (host time: s48b) and made again when that tensor
    changes in place (load_state_dict copies new signs into a layer's buffers) or another tensor comes."""
    from fa3nn.fp8.backward import _signs

    rotation = make_state(fa3nn.PerTileScaling(), 0).rotation(64).clone()
    first = _signs(rotation, rotation.device)
    assert _signs(rotation, rotation.device)[0] is first[0]  # kept
    assert torch.equal(first[0].float() * first[1], rotation.T) and set(first[0].unique().tolist()) == {-1.0, 1.0}
    rotation.mul_(-1)
    flipped = _signs(rotation, rotation.device)
    assert torch.equal(flipped[0], -first[0]) and torch.equal(flipped[1], first[1])
    other = make_state(fa3nn.PerTileScaling(), 5).rotation(64)
    assert torch.equal(_signs(other, other.device)[0].float() * first[1], other.T)


@pytest.mark.parametrize("from_quantized", [False, True])
@pytest.mark.parametrize("varlen", [False, True])
def test_eager_fp8_path_is_the_op_without_its_dispatch(varlen, from_quantized):
    """Eager FP8 calls run fa3nn::fwd_fp8's implementation through a plain autograd.Function (fa3nn.ops.
    attention_call_fp8: the custom op's dispatch was ~30% of the FP8 op's host time, s48d): outputs and gradients
    are the op's bit for bit, dense and packed, from either backward_from."""
    from fa3nn.ops import attention_call_fp8

    args = op_args("per_tile_incoherent", varlen)
    tail = (False, 0, from_quantized)
    eager = attention_call_fp8(*args, *tail)
    assert type(eager[0].grad_fn).__name__ == "_EagerAttentionFP8Backward"
    op = attention_forward_fp8(*args, *tail)
    assert "fa3nn_fwd_fp8" in type(op[0].grad_fn).__name__
    for a, b in zip(eager, op):
        assert torch.equal(a, b)
    dout = torch.randn_like(op[0])
    for a, b in zip(torch.autograd.grad(eager[0], args[:3], dout), torch.autograd.grad(op[0], args[:3], dout)):
        assert torch.equal(a, b)
    assert [t.requires_grad for t in eager] == [True, True] + [False] * 5


def test_fp8_double_backward_says_it_is_unsupported():
    """A gradient penalty through FP8 attention: first-order gradients with create_graph=True are fine, the second
    derivative raises a message that names FP8 attention (the op raised torch's 'no autograd formula' for
    fa3nn.bwd)."""
    q, k, v = bf16_qkv(1, 40, 40, 2, 2, 32, requires_grad=True)
    out = fa3nn.flash_attn_func(q, k, v, fp8=fa3nn.PerTileScaling())
    dq = torch.autograd.grad(out.float().pow(2).sum(), q, create_graph=True)[0]
    with pytest.raises(RuntimeError, match="fa3nn FP8 attention does not support double backward"):
        dq.float().pow(2).sum().backward()


@pytest.mark.parametrize("capability, kernel", [((7, 5), False), ((8, 0), True), ((9, 0), True)])
def test_restore_runs_the_triton_pass_only_on_gpus_the_triton_backend_serves(monkeypatch, capability, kernel):
    """restore's default on CUDA: the Triton pass from sm_80 on (the Triton backend's floor), the PyTorch definition
    on older GPUs, which the FP8 emulation reaches with backward_from="quantized" (a stand-in CUDA tensor and
    capability; the pass itself is a stub that records being called)."""
    import fa3nn.backends.triton as triton_backend
    from fa3nn.fp8 import backward as fp8_backward

    x8 = (torch.randn(2, 37, 3, 64) * 8).to(torch.float8_e4m3fn)
    descale = torch.rand(2, 3, 3)
    called = []
    monkeypatch.setattr(triton_backend, "_TRITON_INSTALLED", True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(fp8_backward, "_restore_rows_impl", lambda *args: called.append(args) or "pass")
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
    got = fp8_restore(x8, descale, 16, None, None, None, torch.bfloat16)
    monkeypatch.undo()
    assert bool(called) == kernel
    if not kernel:
        assert torch.equal(got, fp8_restore(x8, descale, 16, None, None, None, torch.bfloat16, kernel=False))
