"""fa3nn.patch_hf on tiny random Llama, Mistral, Qwen2, Gemma-2, Qwen3, Gemma-3, Phi-3, Granite, OLMo-2 and Starcoder2
models (CPU, reference backend).

Numerics follow FlashAttention-3's error-ratio rule (fa3nn.testing.assert_error_ratio) at the model level:
  actual = the patched model in float32,  ref = the eager model in float64,  pt = the eager model in float32.
The patched model may be at most twice as far from the float64 truth as eager attention at float32 is.
"""

from __future__ import annotations

import copy
import inspect

import pytest
import torch

transformers = pytest.importorskip("transformers")

import fa3nn  # noqa: E402
from fa3nn.integrations import hf_mask_probe  # noqa: E402
from fa3nn.integrations.hf import ATTN_IMPLEMENTATION, LAYER_ATTRIBUTE, QUERY_SLICER, UnsupportedModel  # noqa: E402
from fa3nn.testing import assert_error_ratio  # noqa: E402

VOCAB, SEQLEN, WINDOW = 96, 16, 6
COMMON = dict(
    vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, max_position_embeddings=64, attn_implementation="eager", tie_word_embeddings=False,
)


def _config(family: str):
    if family == "llama":
        return transformers.LlamaConfig(**COMMON)
    if family == "mistral":  # every layer slides
        return transformers.MistralConfig(**COMMON, sliding_window=WINDOW)
    if family == "qwen2":  # layer 0 full, layer 1 sliding
        return transformers.Qwen2Config(**COMMON, use_sliding_window=True, sliding_window=WINDOW, max_window_layers=1)
    if family == "gemma2":  # alternating sliding/full, softcapped scores, scale from query_pre_attn_scalar
        return transformers.Gemma2Config(
            **COMMON, head_dim=16, sliding_window=WINDOW, attn_logit_softcapping=1.5, final_logit_softcapping=None,
            query_pre_attn_scalar=24,
        )
    if family == "qwen3":  # q / k RMSNorm per head before RoPE, every layer sliding
        return transformers.Qwen3Config(**COMMON, head_dim=16, use_sliding_window=True, sliding_window=WINDOW,
                                        max_window_layers=0)
    if family == "gemma3":  # five sliding layers per full one (here: layer 0 sliding, 1 full), q / k norms, no softcap
        return transformers.Gemma3TextConfig(
            **COMMON, head_dim=16, sliding_window=WINDOW, query_pre_attn_scalar=24, final_logit_softcapping=None,
            layer_types=["sliding_attention", "full_attention"],
        )
    if family == "phi3":  # fused qkv projection, partial rotary
        return transformers.Phi3Config(**COMMON, pad_token_id=0)
    if family == "granite":  # its own attention_multiplier as the softmax scale
        return transformers.GraniteConfig(**COMMON, attention_multiplier=0.05)
    if family == "olmo2":  # q / k RMSNorm over all heads (not per head), norms after attention and MLP
        return transformers.Olmo2Config(**COMMON)
    if family == "starcoder2":  # biases in every projection, every layer sliding
        return transformers.Starcoder2Config(**COMMON, sliding_window=WINDOW)
    if family == "gpt_oss":  # a sink logit per head (s_aux), layer 0 sliding, mixture of experts (eager: fp64 runs)
        return transformers.GptOssConfig(
            **COMMON, head_dim=16, sliding_window=WINDOW, layer_types=["sliding_attention", "full_attention"],
            num_local_experts=4, num_experts_per_tok=2, experts_implementation="eager",
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        )
    if family == "deepseek_v3":  # multi-head latent attention: q / k head dim 24 (16 + 8 rope), v 16; dense MLPs
        return transformers.DeepseekV3Config(  # (4.57's MoE mixes a float32 router into fp64: no fp64 reference)
            **{**COMMON, "num_key_value_heads": 4}, moe_intermediate_size=32, n_routed_experts=4,
            num_experts_per_tok=2, n_shared_experts=1, first_k_dense_replace=2, q_lora_rank=32, kv_lora_rank=32,
            qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=16, n_group=1, topk_group=1,
        )
    if family == "llama4":  # chunked attention (layer 0, chunks of 6 positions), a NoPE layer 1, q / k L2 norm;
        return transformers.Llama4TextConfig(  # dense MLPs. No temperature tuning: it scales q by the row position,
            **COMMON, head_dim=16, intermediate_size_mlp=96, attention_chunk_size=WINDOW,  # not position_ids, so
            no_rope_layers=[1, 0], moe_layers=[], interleave_moe_layer_step=0,  # padding / packing would change
            num_local_experts=1, attn_temperature_tuning=False,  # eager's own output
        )
    if family == "cohere2":  # sliding layers (every 4th full), parallel attention + MLP, logit scale
        return transformers.Cohere2Config(**COMMON, sliding_window=WINDOW, layer_types=["sliding_attention",
                                                                                        "full_attention"])
    if family == "mixtral":  # mixture of experts (eager experts: the grouped matmul has no fp64 kernel)
        return transformers.MixtralConfig(**COMMON, num_local_experts=4, num_experts_per_tok=2,
                                          experts_implementation="eager")
    raise ValueError(family)


MODEL_CLASSES = {
    "llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM",
    "gemma2": "Gemma2ForCausalLM", "qwen3": "Qwen3ForCausalLM", "gemma3": "Gemma3ForCausalLM",
    "phi3": "Phi3ForCausalLM", "granite": "GraniteForCausalLM", "olmo2": "Olmo2ForCausalLM",
    "starcoder2": "Starcoder2ForCausalLM", "gpt_oss": "GptOssForCausalLM", "mixtral": "MixtralForCausalLM",
    "deepseek_v3": "DeepseekV3ForCausalLM", "llama4": "Llama4ForCausalLM", "cohere2": "Cohere2ForCausalLM",
}
FAMILIES = tuple(MODEL_CLASSES)


def _widen(model, projections=("q_proj.weight", "k_proj.weight")):
    """Random init is small: q / k projections x 4, so that attention is far from uniform and softcap bites."""
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith(projections):
                param.mul_(4.0)
    return model


def _model(family: str):
    model = _widen(getattr(transformers, MODEL_CLASSES[family])(_config(family)).eval())
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("sinks"):  # gpt-oss: sinks of the size of the scores, so that they matter
                param.copy_(torch.randn(param.shape, generator=torch.Generator().manual_seed(3)) * 2)
    return model


def _run(model, input_ids, dtype, loss_mask=None, **kwargs):
    """Logits and the gradients of a weighted logit sum (weights fixed by a seed), in float64 for comparison."""
    model = model.to(dtype)
    model.zero_grad(set_to_none=True)
    logits = model(input_ids, **kwargs).logits
    weights = torch.randn(logits.shape, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    if loss_mask is not None:
        weights = weights * loss_mask[..., None]
    (logits.double() * weights).sum().backward()
    grads = torch.cat([p.grad.double().flatten() for p in model.parameters() if p.grad is not None])
    return logits.detach().double(), grads


def _three_ways(family, input_ids, loss_mask=None, **kwargs):
    """(actual, ref, pt) logits and grads: patched fp32, eager fp64, eager fp32 (same weights)."""
    model = _model(family)
    ref = _run(copy.deepcopy(model), input_ids, torch.float64, loss_mask, **kwargs)
    pt = _run(copy.deepcopy(model), input_ids, torch.float32, loss_mask, **kwargs)
    actual = _run(fa3nn.patch_hf(model), input_ids, torch.float32, loss_mask, **kwargs)
    return actual, ref, pt


def _assert_matches(actual, ref, pt, keep=None):
    keep = (lambda t: t) if keep is None else keep
    assert_error_ratio(keep(actual[0]), keep(ref[0]), keep(pt[0]), "logits")
    assert_error_ratio(actual[1], ref[1], pt[1], "parameter gradients")


@pytest.mark.parametrize("family", FAMILIES)
def test_patched_matches_eager(family):
    input_ids = torch.randint(0, VOCAB, (2, SEQLEN))
    _assert_matches(*_three_ways(family, input_ids))


def _run_rows(model, input_ids, real, dtype):
    """Like `_run` on the real tokens of each row alone (no padding anywhere), at the positions they have in the
    padded batch. Returns logits in `logits[real]` order and the gradients of the same weighted sum."""
    model = model.to(dtype)
    model.zero_grad(set_to_none=True)
    weights = torch.randn((*input_ids.shape, VOCAB), generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    positions = torch.arange(input_ids.shape[1])
    rows = []
    for row in range(input_ids.shape[0]):
        keep = real[row]
        logits = model(input_ids[row, keep][None], position_ids=positions[keep][None]).logits[0]
        (logits.double() * weights[row, keep]).sum().backward()
        rows.append(logits.detach().double())
    grads = torch.cat([p.grad.double().flatten() for p in model.parameters() if p.grad is not None])
    return torch.cat(rows), grads


@pytest.mark.parametrize("side", ["left", "right", "right_no_full_row"])
@pytest.mark.parametrize("family", FAMILIES)
def test_padding(family, side):
    """A padded batch through the patched model equals each row's real tokens alone (eager, per row). Eager on the
    padded batch itself is no reference: at float64 its fully masked padding rows turn to NaN and leak. Right
    padding runs as slots (fa3nn.slots); without a full row (padding="max_length") its padding tails are the longest
    packed sequences."""
    input_ids = torch.randint(0, VOCAB, (3, SEQLEN))
    mask = torch.ones(3, SEQLEN, dtype=torch.long)
    pads = ((0, 4), (1, 5), (2, 11)) if side == "right_no_full_row" else ((1, 5), (2, 11))
    for row, pad in pads:
        if side == "left":
            mask[row, :pad] = 0
        else:
            mask[row, SEQLEN - pad:] = 0
    real = mask.bool()
    model = _model(family)
    ref = _run_rows(copy.deepcopy(model), input_ids, real, torch.float64)
    pt = _run_rows(copy.deepcopy(model), input_ids, real, torch.float32)
    logits, grads = _run(fa3nn.patch_hf(model), input_ids, torch.float32, real.double(), attention_mask=mask)
    _assert_matches((logits[real], grads), ref, pt)


ENCODERS = {  # models whose attention modules keep their scale under another name (found by their forward)
    "clip_text": lambda: transformers.CLIPTextModel(transformers.CLIPTextConfig(
        **{**COMMON, "num_key_value_heads": None}, attention_dropout=0.0)),  # causal, padding
    "siglip_text": lambda: transformers.SiglipTextModel(transformers.SiglipTextConfig(
        **{**COMMON, "num_key_value_heads": None}, attention_dropout=0.0)),  # bidirectional, no mask
    "modernbert": lambda: transformers.ModernBertModel(transformers.ModernBertConfig(  # local windows + global
        vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        max_position_embeddings=64, local_attention=6, global_attn_every_n_layers=2, pad_token_id=0,
        attn_implementation="eager")),
}


@pytest.mark.parametrize("name", ENCODERS)
def test_models_keeping_their_scale_elsewhere(name):
    """CLIP's, SigLIP's and ModernBERT's attention modules call the AttentionInterface without a `scaling`
    attribute: patch_hf finds them by their forward (before: refused as having no attention layer). Padded batches
    (SigLIP's text tower takes none) against eager by the error-ratio rule, hidden states and gradients. On
    transformers 4.x CLIP builds 4D masks and ModernBERT bypasses the interface: both refused clearly."""
    torch.manual_seed(0)
    model = ENCODERS[name]().eval()
    if name != "siglip_text" and int(transformers.__version__.split(".")[0]) < 5:  # 4.x: other modeling code
        refusal = {"clip_text": (ValueError, "takes a 2D padding mask"),  # it builds its masks in 4D
                   "modernbert": (UnsupportedModel, "does not go through the AttentionInterface")}[name]
        ids = torch.randint(4, VOCAB, (2, SEQLEN))
        with torch.no_grad(), pytest.raises(refusal[0], match=refusal[1]):
            fa3nn.patch_hf(model)(input_ids=ids, attention_mask=torch.ones_like(ids))
        return
    _widen(model, ("q_proj.weight", "k_proj.weight", "Wqkv.weight"))
    ids = torch.randint(4, VOCAB, (2, SEQLEN))
    inputs = dict(input_ids=ids)
    real = torch.ones_like(ids, dtype=torch.bool)
    if name != "siglip_text":
        real[1, 11:] = False
        inputs["attention_mask"] = real.long()

    weights = torch.randn((*ids.shape, 64), generator=torch.Generator().manual_seed(7), dtype=torch.float64)

    def run(m, dtype, per_row=False):
        """Hidden states of the real tokens, gradients of their weighted sum; per_row: each row's real tokens alone
        (eager's reference under padding: at float64 ModernBERT's masked rows turn to NaN and leak)."""
        m = m.to(dtype)
        m.zero_grad(set_to_none=True)
        calls = [(slice(r, r + 1), real[r]) for r in range(2)] if per_row else [(slice(0, 2), slice(None))]
        hidden = []
        for rows, keep in calls:
            out = m(**{n: x[rows][:, keep] for n, x in inputs.items()}).last_hidden_state
            kept = real[rows][:, keep]
            (out.double() * weights[rows][:, keep] * kept[..., None]).sum().backward()
            hidden.append(out.detach().double()[kept])
        grads = torch.cat([p.grad.double().flatten() for p in m.parameters() if p.grad is not None])
        return torch.cat(hidden), grads

    ref = run(copy.deepcopy(model), torch.float64, per_row=True)
    pt = run(copy.deepcopy(model), torch.float32, per_row=True)
    patched = fa3nn.patch_hf(model)
    assert sum(hasattr(m, LAYER_ATTRIBUTE) for m in patched.modules()) == 2
    _assert_matches(run(patched, torch.float32), ref, pt)


def _bart():
    config = transformers.BartConfig(
        vocab_size=VOCAB, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=96, decoder_ffn_dim=96, max_position_embeddings=64, dropout=0.0,
        attention_dropout=0.0, attn_implementation="eager", pad_token_id=1, decoder_start_token_id=2,
        forced_eos_token_id=None,
    )
    model = transformers.BartForConditionalGeneration(config).eval()
    return _widen(model)


def _source_batch():
    source = torch.randint(4, VOCAB, (3, SEQLEN))
    mask = torch.ones_like(source)
    mask[1, 9:] = 0  # right padding
    mask[2, :5] = 0  # left padding
    return source, mask


@pytest.mark.parametrize("target_length", [7, SEQLEN])
def test_cross_attention_with_a_padded_source(target_length):
    """Encoder-decoder (BART): the decoder's queries are not positions of the encoder's keys, whose padding mask
    covers the keys alone. Before, that mask unpadded the queries as if they were its last columns: with a padded
    source, decoder rows came out zero and the logits wrong, silently. transformers 4.x builds BART's masks in 4D
    itself: refused with a clear error there."""
    model = _bart()
    source, mask = _source_batch()
    target = torch.randint(4, VOCAB, (3, target_length))  # equal lengths: the mask function cannot tell them apart
    if int(transformers.__version__.split(".")[0]) < 5:
        with torch.no_grad(), pytest.raises(ValueError, match="takes a 2D padding mask"):
            fa3nn.patch_hf(copy.deepcopy(model))(input_ids=source, attention_mask=mask, decoder_input_ids=target)
        return

    def run(m, dtype):
        m = m.to(dtype)
        m.zero_grad(set_to_none=True)
        logits = m(input_ids=source, attention_mask=mask, decoder_input_ids=target).logits
        weights = torch.randn(logits.shape, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
        (logits.double() * weights).sum().backward()
        grads = torch.cat([p.grad.double().flatten() for p in m.parameters() if p.grad is not None])
        return logits.detach().double(), grads

    ref, pt = run(copy.deepcopy(model), torch.float64), run(copy.deepcopy(model), torch.float32)
    _assert_matches(run(fa3nn.patch_hf(model), torch.float32), ref, pt)


def test_encoder_decoder_generate_matches_eager():
    """Greedy generation from a padded source: cross-attention of one decoder query per step against the cached
    encoder keys and their padding mask."""
    model = _bart().float()
    source, mask = _source_batch()
    options = dict(attention_mask=mask, max_new_tokens=6, do_sample=False, num_beams=1)
    expected = model.generate(source, **options)
    if int(transformers.__version__.split(".")[0]) < 5:
        return  # 4.x: BART's 4D masks are refused (test_cross_attention_with_a_padded_source)
    fa3nn.patch_hf(model)
    assert torch.equal(model.generate(source, **options), expected)


@pytest.mark.parametrize("family", ["mistral", "llama4", "llama"])
def test_holes_under_a_window_through_the_padding_mask(family):
    """A padding mask with a hole inside a row, in a model with sliding windows (Mistral) or chunks (Llama 4): fa3nn
    counts those over the real tokens, eager over positions (0.16 / 0.44 apart in float64), so it refuses; without
    either (Llama) the hole runs as any padding does."""
    model = fa3nn.patch_hf(_model(family))
    ids = torch.randint(0, VOCAB, (2, SEQLEN))
    mask = torch.ones_like(ids)
    mask[0, 8] = 0
    with torch.no_grad():
        if family == "llama":
            model(ids, attention_mask=mask)
        else:
            with pytest.raises(NotImplementedError, match="padding inside a sequence"):
                model(ids, attention_mask=mask)


@pytest.mark.parametrize("layout", ["right", "left", "holes"])
def test_right_padding_needs_no_unpadding(layout, monkeypatch):
    """A right-padded mask with as many queries as keys runs as slots (fa3nn.slots): q, k, v are views, the output
    needs no scatter; other masks are unpadded. Both against attention_ref with the mask."""
    from fa3nn.integrations import hf_padding
    from fa3nn.integrations.hf_padding import unpad_by_mask
    from fa3nn.testing import attention_ref

    q, k, v = (torch.randn(3, 12, h, 16, dtype=torch.float64) for h in (4, 2, 2))
    lengths = torch.tensor([9, 2, 0])  # no full row: padding="max_length" (a padding tail longer than any row)
    mask = torch.arange(12) < lengths[:, None]
    if layout == "left":
        mask = mask.flip(-1)
    elif layout == "holes":
        mask[0, 3] = False
    packed = unpad_by_mask(q, k, v, mask)
    assert (packed.query_rows is None) == (layout == "right")
    if layout == "right":  # the switch the step A/B uses: the same mask unpadded
        monkeypatch.setattr(hf_padding, "RIGHT_PADDING_AS_SLOTS", False)
        assert unpad_by_mask(q, k, v, mask).query_rows is not None
    assert (packed.q.data_ptr() == q.data_ptr()) == (layout == "right")
    out = packed.restore(fa3nn.flash_attn_varlen_func(
        packed.q, packed.k, packed.v, packed.cu_seqlens_q, packed.cu_seqlens_k, packed.max_seqlen_q,
        packed.max_seqlen_k, causal=True))
    for row in range(3):  # each row's real tokens alone; padding query rows zero
        keep = mask[row]
        expected, _ = attention_ref(q[row, keep][None], k[row, keep][None], v[row, keep][None], causal=True)
        torch.testing.assert_close(out[row, keep], expected[0], rtol=1e-12, atol=1e-12)
        assert torch.equal(out[row, ~keep], torch.zeros_like(out[row, ~keep]))


def _drops_position_ids(family: str) -> bool:
    """Decoder layers that do not hand position_ids to attention: Llama 4's, and Cohere2's before transformers 5."""
    return family == "llama4" or (family == "cohere2" and int(transformers.__version__.split(".")[0]) < 5)


@pytest.mark.parametrize("boundaries", ["position_ids", "cu_seq_lens", "cu_seq_lens_only"])
@pytest.mark.parametrize("family", FAMILIES)
def test_packed_equals_per_sequence(family, boundaries):
    """Packed sequences against each run alone, with a cache (eval's default). cu_seq_lens_only: DataCollatorWith
    Flattening(return_position_ids=False) in training (no cache, positions continuing across sequences: RoPE is
    relative, so each sequence's attention is unchanged); transformers 4.57 then hands the mask function position ids
    it made up itself and the layout said one sequence per row, which won over the caller's cu_seq_lens (0.4-0.9 off
    in float64, silently)."""
    lengths = (5, 9, 4)
    sequences = [torch.randint(0, VOCAB, (1, n)) for n in lengths]
    model = _model(family)
    patched = fa3nn.patch_hf(copy.deepcopy(model)).float()
    packed_ids = torch.cat(sequences, dim=1)
    position_ids = torch.cat([torch.arange(n) for n in lengths]).unsqueeze(0)
    if boundaries == "position_ids":
        kwargs = dict(position_ids=position_ids)
    else:
        cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int64)
        kwargs = dict(cu_seq_lens_q=cu, cu_seq_lens_k=cu, max_length_q=max(lengths), max_length_k=max(lengths))
        if boundaries == "cu_seq_lens_only":
            kwargs["use_cache"] = False
        else:
            kwargs["position_ids"] = position_ids
    if boundaries == "position_ids" and _drops_position_ids(family):  # its layers are not handed them: refused
        with torch.no_grad(), pytest.raises(NotImplementedError, match=r"not handed position_ids"):
            patched(packed_ids, **kwargs)
        return
    with torch.no_grad():
        actual = patched(packed_ids, **kwargs).logits.double()
        ref = torch.cat([model.double()(s).logits for s in sequences], dim=1)
        pt = torch.cat([model.float()(s).logits for s in sequences], dim=1).double()
    assert_error_ratio(actual, ref, pt, "packed logits vs per-sequence")
    # and packing matters: without boundaries, later sequences would attend across them
    with torch.no_grad():
        unbounded = patched(packed_ids).logits.double()
    assert (unbounded[:, lengths[0]:] - ref[:, lengths[0]:]).abs().max() > 1e-3


def test_packing_a_layer_cannot_see_is_refused(monkeypatch):
    """A decoder layer that drops position_ids (Cohere2's in transformers 4.57, Llama 4's) leaves attention blind to
    packing: the patched model refuses such a batch instead of attending across its sequences, and still runs
    unpacked ones, padded ones and packing given as cu_seq_lens."""
    model = fa3nn.patch_hf(_model("llama"))
    for layer in model.model.layers:  # the attention module's forward as such a decoder layer would call it
        forward = layer.self_attn.forward
        monkeypatch.setattr(layer.self_attn, "forward",
                            lambda *a, _f=forward, **kw: _f(*a, **{n: x for n, x in kw.items() if n != "position_ids"}))
    lengths = (5, 9, 4)
    ids = torch.randint(0, VOCAB, (1, sum(lengths)))
    position_ids = torch.cat([torch.arange(n) for n in lengths]).unsqueeze(0)
    with torch.no_grad():
        with pytest.raises(NotImplementedError, match=r"LlamaAttention is not handed position_ids .* pack several"):
            model(ids, position_ids=position_ids)
        model(ids, position_ids=torch.arange(sum(lengths)).unsqueeze(0))  # one sequence per row: runs
        cu = torch.tensor([0, 5, 14, 18])
        model(ids, position_ids=position_ids, cu_seq_lens_q=cu, cu_seq_lens_k=cu, max_length_q=9, max_length_k=9)
        # the base model called directly, by keyword or by position; no stale position_ids after a refused call
        with pytest.raises(NotImplementedError, match=r"not handed position_ids"):
            model.model(ids, position_ids=position_ids)
        with pytest.raises(NotImplementedError, match=r"not handed position_ids"):
            model.model(ids, None, position_ids)
        model.model(ids)
        model(ids)
    fa3nn.unpatch_hf(model)
    assert not model._forward_pre_hooks and not model._forward_hooks and not model.model._forward_pre_hooks
    assert not hasattr(model.model.layers[0].self_attn, "_fa3nn_packing_watch")


@pytest.mark.parametrize("how", ["patched", "by_name"])
@pytest.mark.parametrize("family", FAMILIES)
def test_packing_seen_by_the_mask_equals_per_sequence(family, how, monkeypatch):
    """Packing given by position_ids alone, without a cache (training: transformers looks for packing only then),
    reaches attention through the mask as segment ids, in every family, patched or registered by name (no patch_hf,
    so no packing watch). Llama 4's decoder layers and Cohere2's before transformers 5 do not hand position_ids to
    attention: by name, Llama 4 was refused and Cohere2 on 4.57 ran the batch unpacked, silently. The reference is
    each sequence run alone (FlashAttention's packing convention; gpt-oss's eager does not pack, its masks are not
    handed position_ids), except Llama 4: fa3nn runs the chunks of the mask it is given, and transformers 4.x and
    5.17 count them from the row's start across packed sequences (5.25 from each sequence's, where eager's packed
    call equals the per-sequence runs), so its reference is eager's packed call."""
    lengths = (5, 9, 4)
    model = _model(family)
    if how == "patched":
        fa3nn_model = fa3nn.patch_hf(copy.deepcopy(model))
    else:
        fa3nn.patch_hf()
        config = copy.deepcopy(model.config)
        config._attn_implementation = ATTN_IMPLEMENTATION
        fa3nn_model = type(model)(config).eval()
        fa3nn_model.load_state_dict(model.state_dict())
    sequences = [torch.randint(0, VOCAB, (1, n)) for n in lengths]
    ids = torch.cat(sequences, dim=1)
    packing = dict(position_ids=torch.cat([torch.arange(n) for n in lengths]).unsqueeze(0), use_cache=False)
    rows_chunks = family == "llama4"  # (a version test put 5.17 on the per-sequence side: 0.32 off, not fa3nn's)
    calls = []  # how the mask function was evaluated: broadcast where transformers 5 says it may be (use_vmap=False)
    monkeypatch.setattr(hf_mask_probe, "pairs", _recording(hf_mask_probe.pairs, calls))

    def reference(dtype):
        if rows_chunks:
            return model.to(dtype)(ids, **packing).logits.double()
        return torch.cat([model.to(dtype)(s).logits for s in sequences], dim=1).double()

    with torch.no_grad():
        actual = fa3nn_model.float()(ids, **packing).logits.double()
        ref, pt = reference(torch.float64), reference(torch.float32)
        unpacked = model.double()(ids, use_cache=False).logits
    assert_error_ratio(actual, ref, pt, f"{family} {how}, packed")
    assert (unpacked[:, lengths[0]:] - ref[:, lengths[0]:]).abs().max() > 1e-3  # the packing mattered
    assert bool(calls) == (family != "gpt_oss")  # (gpt-oss's masks are not handed position_ids)
    assert all(index_based == (int(transformers.__version__.split(".")[0]) >= 5) for index_based in calls)


def _recording(pairs, calls: list):
    def recorded(mask_function, q_idx, kv_idx, index_based=False, batch_size=None):
        calls.append(index_based)
        return pairs(mask_function, q_idx, kv_idx, index_based, batch_size)
    return recorded


def _create_causal_mask(config, embeds, **kwargs):
    """transformers' create_causal_mask without a cache, in either version's argument names."""
    from transformers.masking_utils import create_causal_mask

    parameters = inspect.signature(create_causal_mask).parameters
    args = dict(config=config, attention_mask=None, **kwargs)
    args["inputs_embeds" if "inputs_embeds" in parameters else "input_embeds"] = embeds
    if "cache_position" in parameters:  # 4.5x
        args.update(cache_position=torch.arange(embeds.shape[1]))
    args["cache" if "cache" in parameters else "past_key_values"] = None  # 5.25 / earlier releases
    return create_causal_mask(**args)


def _cache_argument(model) -> str:
    """The name a model's forward takes its cache by: 'cache' (transformers 5.25), 'past_key_values' (4.x, 5.17)."""
    return "cache" if "cache" in inspect.signature(type(model).forward).parameters else "past_key_values"


@pytest.mark.parametrize("prompt_length", [17, 4])
@pytest.mark.parametrize("family", ["llama", "llama4", "mistral"])
def test_static_cache_without_a_mask(family, prompt_length):
    """A static cache allocates every slot up front, and without an attention_mask transformers hands fa3nn no mask:
    the queries were aligned to the cache's end and attended its empty slots (before this session too: scores 0.4-0.8
    off). The mask function now cuts the keys at the last query. Greedy tokens and scores against eager. A prompt
    shorter than Llama 4's chunk (6) on 4.57 hands a mask shorter than the chunked layer's slots: those slots are
    empty (it was refused as several queries after cached keys)."""
    model = _model(family).float()
    prompt = torch.randint(0, VOCAB, (1, prompt_length))
    options = dict(max_new_tokens=5, do_sample=False, output_scores=True, return_dict_in_generate=True,
                   cache_implementation="static")
    with torch.no_grad():
        try:
            expected = model.generate(prompt, **options)
        except TypeError as error:  # transformers 5.17's own Llama 4 static-cache mask (eager fails there too)
            if "block_sequence_ids" not in str(error):
                raise
            pytest.skip(f"transformers {transformers.__version__}'s eager {family} fails with a static cache: {error}")
        actual = fa3nn.patch_hf(model).generate(prompt, **options)
    assert torch.equal(actual.sequences, expected.sequences)
    torch.testing.assert_close(torch.stack(actual.scores), torch.stack(expected.scores), atol=2e-5, rtol=0)


def test_llama4_chunked_layers_decode():
    """Llama 4's chunked layers while decoding: the cache keeps the last chunk's worth of keys and fa3nn counted
    chunks from the first of them, not from the sequence's start (scores 0.2-0.8 off from the step that crossed a
    chunk start, silently). The mask function now hands it the keys the query sees. Greedy tokens and every step's
    scores against eager; a second prefill after cached keys is refused (a key mask cannot say where its queries'
    chunks start)."""
    model = _model("llama4").float()
    prompt = torch.randint(0, VOCAB, (1, 17))  # chunks of 6: the steps cross the starts at 18 and 24
    options = dict(max_new_tokens=9, do_sample=False, output_scores=True, return_dict_in_generate=True)
    with torch.no_grad():
        expected = model.generate(prompt, **options)
        patched = fa3nn.patch_hf(model)
        actual = patched.generate(prompt, **options)
        assert torch.equal(actual.sequences, expected.sequences)
        torch.testing.assert_close(torch.stack(actual.scores), torch.stack(expected.scores), atol=2e-5, rtol=0)
        cache = patched(prompt, use_cache=True).past_key_values
        with pytest.raises(NotImplementedError, match="several queries after cached keys"):
            patched(torch.randint(0, VOCAB, (1, 3)), **{_cache_argument(patched): cache}, use_cache=True)


def test_gemma3_images_generate():
    """Generation from a prompt with an image: with the default (dynamic) cache the prefill's mask is read as a layout
    and the first step's scores match eager. A static cache hands the mask function its full length: its empty slots
    are cut off (5.x: the keys end at the last query; 4.57: at the padding mask's end, which covers the filled slots)
    and the prefill is read as a layout too (4.57 refused it before)."""
    model = _gemma3_vlm().float()
    ids = torch.randint(4, VOCAB - 4, (1, 2 * SEQLEN))
    ids[0, 5:9] = VOCAB - 1
    inputs = dict(input_ids=ids, token_type_ids=(ids == VOCAB - 1).long(), pixel_values=torch.randn(1, 3, 16, 16),
                  attention_mask=torch.ones_like(ids))
    options = dict(max_new_tokens=3, do_sample=False, output_scores=True, return_dict_in_generate=True)
    with torch.no_grad():
        expected = model.generate(**inputs, **options).scores[0]
        patched = fa3nn.patch_hf(model)
        torch.testing.assert_close(patched.generate(**inputs, **options).scores[0], expected, atol=2e-5, rtol=0)
        static = dict(options, cache_implementation="static")
        torch.testing.assert_close(patched.generate(**inputs, **static).scores[0], expected, atol=2e-5, rtol=0)


def test_overlay_fa3nn_cannot_run_is_refused():
    """An or_mask_function fa3nn cannot run (each query also sees the next key) through transformers' own mask
    building with attn_implementation='fa3nn': the attention refuses the batch instead of running it causal."""
    from fa3nn.integrations.hf import fa3nn_attention_forward
    from fa3nn.integrations.hf_mask_probe import CUSTOM

    fa3nn.patch_hf()
    config = copy.deepcopy(_config("llama"))
    config._attn_implementation = ATTN_IMPLEMENTATION
    embeds = torch.zeros(1, SEQLEN, 8)
    layout = _create_causal_mask(config, embeds, or_mask_function=lambda b, h, q, kv: kv == q + 1)
    assert layout.dtype == torch.int32 and layout.dim() == 3 and not (layout[0] == CUSTOM).any()  # looks bidirectional
    q = torch.randn(1, 4, SEQLEN, 16)
    module = torch.nn.Module()
    with pytest.raises(NotImplementedError, match="differs from what fa3nn would run"):  # but key i + 2 is unseen
        fa3nn_attention_forward(module, q, q[:, :2], q[:, :2], layout, scaling=0.25)
    assert _create_causal_mask(config, embeds) is None  # no overlay: transformers skips the mask, fa3nn runs causal


def _gemma3_vlm():
    text = transformers.Gemma3TextConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, max_position_embeddings=64, sliding_window=WINDOW,
        layer_types=["sliding_attention", "full_attention"], query_pre_attn_scalar=24,
    )
    vision = transformers.SiglipVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                             num_attention_heads=2, image_size=16, patch_size=4)
    config = transformers.Gemma3Config(text_config=text, vision_config=vision, mm_tokens_per_image=4,
                                       image_token_index=VOCAB - 1, boi_token_index=VOCAB - 2,
                                       eoi_token_index=VOCAB - 3, attn_implementation="eager")
    model = transformers.Gemma3ForConditionalGeneration(config).eval()
    return _widen(model)


@pytest.mark.parametrize("padded", [False, True])
def test_gemma3_image_tokens_match_eager(padded):
    """Gemma 3's image tokens see their whole image (bidirectional blocks in causal rows, sliding layers too):
    patched, the segments run causal and the image rows again non-causal (fa3nn.integrations.hf_layout); logits and
    gradients against eager by the error-ratio rule. Before, the blocks ran causal, silently."""
    model = _gemma3_vlm()
    ids = torch.randint(4, VOCAB - 4, (2, 2 * SEQLEN))
    ids[0, 5:9] = ids[1, 20:24] = VOCAB - 1  # one image of 4 tokens per row (the second past the sliding window)
    inputs = dict(input_ids=ids, token_type_ids=(ids == VOCAB - 1).long(), pixel_values=torch.randn(2, 3, 16, 16))
    real = torch.ones_like(ids, dtype=torch.bool)
    if padded:
        real[0, -6:] = False  # right padding
        inputs["attention_mask"] = real.long()

    weights = torch.randn((*ids.shape, VOCAB), generator=torch.Generator().manual_seed(7), dtype=torch.float64)

    def run(m, dtype, per_row=False):
        """Logits of the real tokens and gradients of their weighted sum; per_row: each row's real tokens alone
        (eager's reference under padding: at float64 its masked rows turn to NaN and leak)."""
        m = m.to(dtype)
        m.zero_grad(set_to_none=True)
        calls = [(slice(r, r + 1), real[r]) for r in range(2)] if per_row else [(slice(0, 2), slice(None))]
        logits = []
        for rows, keep in calls:
            batch = {n: x[rows][:, keep] if n != "pixel_values" else x[rows].to(dtype) for n, x in inputs.items()
                     if n != "attention_mask" or not per_row}
            out = m(**batch).logits
            (out.double() * weights[rows][:, keep] * real[rows][:, keep, None]).sum().backward()
            logits.append(out.detach().double()[real[rows][:, keep]])
        grads = torch.cat([p.grad.double().flatten() for p in m.parameters() if p.grad is not None])
        return torch.cat(logits), grads

    ref = run(copy.deepcopy(model), torch.float64, per_row=padded)
    pt = run(copy.deepcopy(model), torch.float32, per_row=padded)
    _assert_matches(run(fa3nn.patch_hf(model), torch.float32), ref, pt)
    causal_only = fa3nn.patch_hf(_gemma3_vlm())  # and the blocks matter: as plain text tokens the logits differ
    with torch.no_grad():
        plain = causal_only.double()(**{**inputs, "token_type_ids": torch.zeros_like(ids),
                                        "pixel_values": inputs["pixel_values"].double()}).logits[real]
    assert (plain - ref[0]).abs().max() > 1e-3


def test_packing_watch_reaches_inner_models_and_spares_vision_towers():
    """Llama 4's base model (its base_model_prefix names no submodule) called directly with packed position_ids and a
    cache is refused as the outer model is; Gemma 3's vision tower (non-causal, its own lengths) is never refused for
    the text's position_ids: left-padded generation with images matches eager (4.57 refused it)."""
    llama4 = fa3nn.patch_hf(_model("llama4"))
    ids = torch.randint(0, VOCAB, (1, 18))
    packed = torch.cat([torch.arange(n) for n in (5, 9, 4)])[None]
    with torch.no_grad(), pytest.raises(NotImplementedError, match=r"not handed position_ids"):
        llama4.model(ids, position_ids=packed, use_cache=True)
    model = _gemma3_vlm().float()
    prompt = torch.randint(4, VOCAB - 4, (2, 2 * SEQLEN))
    prompt[0, 5:9] = prompt[1, 20:24] = VOCAB - 1
    mask = torch.ones_like(prompt)
    mask[0, :3] = 0
    inputs = dict(input_ids=prompt, attention_mask=mask, token_type_ids=(prompt == VOCAB - 1).long(),
                  pixel_values=torch.randn(2, 3, 16, 16))
    options = dict(max_new_tokens=3, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        expected = model.generate(**inputs, **options)
        assert torch.equal(fa3nn.patch_hf(model).generate(**inputs, **options), expected)


def test_packing_watch_is_per_thread():
    """The watch keeps each thread's call's position_ids: another thread calling the model meanwhile sees none of
    them (one model serving two threads: a packed batch in one must not refuse, or pass, the other's call)."""
    import threading

    from fa3nn.integrations.hf import _PackingWatch

    watch = _PackingWatch()
    model = _model("llama")
    packed = torch.cat([torch.arange(n) for n in (5, 9, 4)])[None]
    watch.before(model, (), dict(position_ids=packed))
    seen = {}
    other = threading.Thread(target=lambda: seen.setdefault("other", watch.position_ids))
    other.start()
    other.join()
    assert seen["other"] is None and watch.position_ids is packed
    watch.after(model, (), {}, None)
    assert watch.position_ids is None


def test_patched_model_copies_and_saves():
    """A patched model deep-copies and pickles (torch.save), its watch included (threading.local does not pickle:
    the per-thread watch broke both until it gave its own state), and the copy computes as the original."""
    import io

    from fa3nn.integrations.hf import WATCH_ATTRIBUTE

    model = fa3nn.patch_hf(_model("llama").float())
    ids = torch.randint(0, VOCAB, (2, SEQLEN))
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    watch = getattr(model.model.layers[0].self_attn, WATCH_ATTRIBUTE)
    for other in (copy.deepcopy(model), torch.load(buffer, weights_only=False)):
        with torch.no_grad():
            assert torch.equal(other(ids).logits, model(ids).logits)
        watches = {id(getattr(layer.self_attn, WATCH_ATTRIBUTE)) for layer in other.model.layers}
        assert len(watches) == 1 and id(watch) not in watches  # its own, shared by its layers


def test_cu_seq_lens_beside_image_blocks():
    """Gemma 3 with images, packed: cu_seq_lens alone leave transformers' mask without the packing, so the layout's
    blocks would sit beside boundaries it did not see: refused (they were dropped before, silently: 0.13 off).
    With restarting position_ids too, the mask holds both and fa3nn equals eager's packed call."""
    model = _gemma3_vlm().float()
    lengths = (14, 18)
    ids = torch.randint(4, VOCAB - 4, (1, sum(lengths)))
    ids[0, 3:7] = ids[0, 20:24] = VOCAB - 1
    cu = torch.tensor([0, lengths[0], sum(lengths)])
    inputs = dict(input_ids=ids, token_type_ids=(ids == VOCAB - 1).long(), pixel_values=torch.randn(2, 3, 16, 16),
                  cu_seq_lens_q=cu, cu_seq_lens_k=cu, max_length_q=max(lengths), max_length_k=max(lengths),
                  use_cache=False)
    patched = fa3nn.patch_hf(copy.deepcopy(model))
    with torch.no_grad():
        with pytest.raises(NotImplementedError, match="cu_seq_lens together with bidirectional blocks"):
            patched(**inputs)
        positions = torch.cat([torch.arange(n) for n in lengths])[None]
        expected = model(**{n: x for n, x in inputs.items() if not n.startswith(("cu_", "max_"))},
                         position_ids=positions).logits
        torch.testing.assert_close(patched(**inputs, position_ids=positions).logits, expected, atol=2e-5, rtol=0)


def test_position_ids_packing_with_batch_and_offset_start():
    """Restarts are found per row (batch > 1) and from any start value (DataCollatorWithFlattening's
    position_ids_start), and a restart at an equal position is one: after a one-token sequence (row 0's middle one,
    positions 2 .. 7, 2, 2 .. 10) the next sequence starts where it did. Read as a restart only below the previous
    position, the one token and the next sequence ran as one (logits 0.37 off)."""
    model = _model("llama").float()
    patched = fa3nn.patch_hf(copy.deepcopy(model))
    rows = [(6, 1, 9), (16,)]
    ids = torch.randint(0, VOCAB, (2, SEQLEN))
    position_ids = torch.stack([torch.cat([torch.arange(n) + 2 for n in row]) for row in rows])
    with torch.no_grad():
        actual = patched(ids, position_ids=position_ids).logits
        expected = []
        for row, lengths in enumerate(rows):
            ends = torch.tensor(lengths).cumsum(0).tolist()
            expected.append(torch.cat([model(ids[row:row + 1, end - n:end],
                                             position_ids=position_ids[row:row + 1, end - n:end]).logits
                                       for n, end in zip(lengths, ends)], dim=1))
    torch.testing.assert_close(actual, torch.cat(expected), atol=2e-5, rtol=0)


def test_shared_attention_block_with_negative_layer_idx():
    """Zamba2's shared attention block is built with layer_idx=-1 (it serves several hybrid layers): patch_hf raised
    FlashAttentionV3's layer_idx error there (found by a probe in s58); such a layer takes its position instead."""
    if not hasattr(transformers, "Zamba2Config"):
        pytest.skip(f"transformers {transformers.__version__} has no Zamba2")
    config = transformers.Zamba2Config(
        vocab_size=VOCAB, hidden_size=64, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=4,
        mamba_d_state=16, mamba_headdim=16, n_mamba_heads=8, attention_head_dim=32, intermediate_size=96,
        layers_block_type=["mamba", "hybrid", "mamba", "hybrid"], hybrid_layer_ids=[1, 3], num_mem_blocks=1,
        pad_token_id=0)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    assert any(getattr(m, "layer_idx", None) == -1 for m in model.modules())
    patched = fa3nn.patch_hf(copy.deepcopy(model))
    ids = torch.randint(1, VOCAB, (2, 12))
    mask = torch.ones_like(ids)
    mask[1, :3] = 0
    with torch.no_grad():
        torch.testing.assert_close(patched(ids, attention_mask=mask).logits[mask.bool()],
                                   model(ids, attention_mask=mask).logits[mask.bool()], atol=2e-5, rtol=0)


@pytest.mark.parametrize("call", ["mask", "cache", "no_mask_no_cache"])
def test_position_ids_skipping_ahead_are_one_sequence(call):
    """Positions that skip ahead (PoSE: 0 .. 9, 30 .. 39) are one sequence where eager runs them as one (a padding
    mask of ones, or a cache): fa3nn cut the row in two there (logits 0.40 off, found by a probe in s58); without a
    mask and a cache eager cuts at the skip, and so does fa3nn (through the mask's layout)."""
    model = _model("llama").float()
    patched = fa3nn.patch_hf(copy.deepcopy(model))
    ids = torch.randint(0, VOCAB, (1, 20))
    positions = torch.cat([torch.arange(10), torch.arange(30, 40)])[None]
    kwargs = {"mask": dict(attention_mask=torch.ones_like(ids), use_cache=False), "cache": dict(use_cache=True),
              "no_mask_no_cache": dict(use_cache=False)}[call]
    with torch.no_grad():
        expected = model(ids, position_ids=positions, **kwargs).logits
        actual = patched(ids, position_ids=positions, **kwargs).logits
        as_two = torch.cat([model(ids[:, :10], position_ids=positions[:, :10], use_cache=False).logits,
                            model(ids[:, 10:], position_ids=positions[:, 10:], use_cache=False).logits], dim=1)
    torch.testing.assert_close(actual, expected, atol=2e-5, rtol=0)
    assert ((expected - as_two).abs().max() < 2e-5) == (call == "no_mask_no_cache")  # eager's own cut, or none


@pytest.mark.parametrize("cache", [None, "static"])
@pytest.mark.parametrize("family", ["llama", "mistral", "gemma2"])
def test_generate_matches_eager(family, cache):
    """Greedy generation from a left-padded prompt longer than the sliding window. A static cache on transformers 4.57
    has the masks built in advance and handed back to the mask function (Mistral's layout crashed there once)."""
    model = _model(family).float()
    prompt = torch.randint(0, VOCAB, (2, 10))
    mask = torch.ones_like(prompt)
    mask[1, :3] = 0  # left padding, as generate expects
    options = dict(attention_mask=mask, max_new_tokens=5, do_sample=False, pad_token_id=0, cache_implementation=cache)
    expected = model.generate(prompt, **options)
    fa3nn.patch_hf(model)
    generated = model.generate(prompt, **options)
    assert generated.shape == (2, 15)
    assert torch.equal(generated, expected)


@pytest.mark.parametrize("family", FAMILIES)
def test_unpatch_restores_bit_identical(family):
    model = _model(family).float()
    input_ids = torch.randint(0, VOCAB, (2, SEQLEN))
    before_keys = list(model.state_dict())
    before = model(input_ids).logits.detach()
    fa3nn.patch_hf(model)
    assert model.config._attn_implementation == ATTN_IMPLEMENTATION
    patched = model(input_ids).logits.detach()
    fa3nn.unpatch_hf(model)
    after = model(input_ids).logits.detach()
    assert model.config._attn_implementation == "eager"
    assert not any(hasattr(m, LAYER_ATTRIBUTE) for m in model.modules())
    assert list(model.state_dict()) == before_keys
    assert torch.equal(after, before)
    assert not torch.equal(patched, before)  # the patch did change the arithmetic (so the check above means something)


def test_patching_around_a_patched_sub_model_unpatches_both():
    """patch_hf(m.model) then patch_hf(m): the outer patch replaces the inner one, and unpatch_hf(m) leaves no hook,
    attached module or switched config behind (the inner patch's hooks and config stayed before)."""
    model = _model("llama").float()
    input_ids = torch.randint(0, VOCAB, (2, SEQLEN))
    before = model(input_ids).logits.detach()
    hooks = [(len(m._forward_pre_hooks), len(m._forward_hooks)) for m in model.modules()]
    fa3nn.patch_hf(model.model)
    fa3nn.patch_hf(model)
    assert not hasattr(model.model, "_fa3nn_previous")
    patched = model(input_ids).logits.detach()
    fa3nn.unpatch_hf(model)
    assert model.config._attn_implementation == model.model.config._attn_implementation == "eager"
    assert [(len(m._forward_pre_hooks), len(m._forward_hooks)) for m in model.modules()] == hooks
    assert not any(hasattr(m, LAYER_ATTRIBUTE) or hasattr(m, "_fa3nn_previous") for m in model.modules())
    assert torch.equal(model(input_ids).logits, before) and not torch.equal(patched, before)


def test_patch_attaches_one_module_per_layer():
    model = fa3nn.patch_hf(_model("qwen2"), backend="reference", deterministic=True)
    attached = [m for m in model.modules() if isinstance(m, fa3nn.FlashAttentionV3)]
    assert len(attached) == model.config.num_hidden_layers
    assert all(m.backend == "reference" and m.deterministic for m in attached)


def test_registered_by_name_for_from_config():
    fa3nn.patch_hf()
    config = _config("llama")
    eager = transformers.LlamaForCausalLM(config).eval()
    config_fa3nn = copy.deepcopy(config)
    config_fa3nn._attn_implementation = ATTN_IMPLEMENTATION
    by_name = transformers.LlamaForCausalLM(config_fa3nn).eval()
    by_name.load_state_dict(eager.state_dict())
    assert by_name.config._attn_implementation == ATTN_IMPLEMENTATION
    ids = torch.randint(0, VOCAB, (2, SEQLEN))
    mask = torch.ones_like(ids)
    mask[0, :4] = 0
    with torch.no_grad():
        torch.testing.assert_close(by_name(ids, attention_mask=mask).logits[mask.bool()],
                                   eager(ids, attention_mask=mask).logits[mask.bool()], atol=2e-5, rtol=0)


def test_padding_mask_function_is_registered():
    """Without the mask function transformers would pass no mask: padding would silently leak into attention."""
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS

    fa3nn.patch_hf()
    mask_fn = ALL_MASK_ATTENTION_FUNCTIONS[ATTN_IMPLEMENTATION]
    padding = torch.tensor([[0, 1, 1], [1, 1, 1]], dtype=torch.bool)
    assert torch.equal(mask_fn(batch_size=2, q_length=3, kv_length=3, attention_mask=padding), padding)
    assert mask_fn(batch_size=2, q_length=3, kv_length=3, attention_mask=torch.ones(2, 3, dtype=torch.bool)) is None
    with pytest.raises(ValueError, match="2D padding mask"):
        mask_fn(batch_size=2, q_length=3, kv_length=3, attention_mask=torch.ones(2, 1, 3, 3, dtype=torch.bool))


def test_dropout_raises_unless_ignored():
    config = _config("llama")
    config.attention_dropout = 0.1
    model = fa3nn.patch_hf(transformers.LlamaForCausalLM(config)).train()
    ids = torch.randint(0, VOCAB, (1, 8))
    with pytest.raises(ValueError, match="FlashAttention-3 has no dropout"):
        model(ids)
    model.eval()
    model(ids)  # eval mode passes dropout=0
    fa3nn.patch_hf(model, ignore_dropout=True).train()
    assert torch.isfinite(model(ids).logits).all()


def _dropout_llama(by_name: bool = False):
    config = _config("llama")
    config.attention_dropout = 0.1
    if by_name:
        config._attn_implementation = ATTN_IMPLEMENTATION
    return transformers.LlamaForCausalLM(config).train()


def test_a_later_patch_keeps_an_earlier_models_ignore_dropout():
    """patch_hf's options were process-wide, the last call's: patching a second model made the first one, patched
    with ignore_dropout=True, raise on dropout."""
    ids = torch.randint(0, VOCAB, (1, 8))
    ignoring = fa3nn.patch_hf(_dropout_llama(), ignore_dropout=True)
    raising = fa3nn.patch_hf(_dropout_llama())
    assert torch.isfinite(ignoring(ids).logits).all()
    with pytest.raises(ValueError, match="FlashAttention-3 has no dropout"):
        raising(ids)


def test_a_later_patch_does_not_turn_dropout_off_in_an_earlier_model():
    """The other way round: patching a second model with ignore_dropout=True made the first one, patched to raise,
    train with attention dropout silently off."""
    ids = torch.randint(0, VOCAB, (1, 8))
    raising = fa3nn.patch_hf(_dropout_llama())
    ignoring = fa3nn.patch_hf(_dropout_llama(), ignore_dropout=True)
    with pytest.raises(ValueError, match="FlashAttention-3 has no dropout"):
        raising(ids)
    assert torch.isfinite(ignoring(ids).logits).all()


def test_models_selected_by_name_take_the_options_of_patch_hf_without_a_model():
    """A model built with attn_implementation="fa3nn" has no patch of its own: it follows patch_hf() without a model,
    and patching another model leaves it as it was."""
    ids = torch.randint(0, VOCAB, (1, 8))
    fa3nn.patch_hf()
    by_name = _dropout_llama(by_name=True)
    try:
        fa3nn.patch_hf(_dropout_llama(), ignore_dropout=True)
        with pytest.raises(ValueError, match="FlashAttention-3 has no dropout"):
            by_name(ids)
        fa3nn.patch_hf(ignore_dropout=True)
        assert torch.isfinite(by_name(ids).logits).all()
        with pytest.raises(ValueError, match="FlashAttention-3 has no dropout"):
            fa3nn.patch_hf(_dropout_llama())(ids)  # a patched model keeps its own options (raise)
    finally:
        fa3nn.patch_hf()  # the by-name defaults back for other tests


def test_a_model_patched_through_an_enclosing_one_is_refused():
    """patch_hf(m) then patch_hf(m.model): the inner patch recorded "fa3nn" (the outer patch's) as the shared config's
    previous implementation, so unpatch_hf(m) left m.model's hooks and unpatch_hf(m.model) set the config back to
    "fa3nn". Now it is refused, nothing changes, and unpatch_hf(m) restores everything."""
    model = _model("llama").float()
    input_ids = torch.randint(0, VOCAB, (2, SEQLEN))
    before = model(input_ids).logits.detach()
    hooks = [(len(m._forward_pre_hooks), len(m._forward_hooks)) for m in model.modules()]
    fa3nn.patch_hf(model)
    patched = model(input_ids).logits.detach()
    with pytest.raises(ValueError, match=r"LlamaModel is already patched through a model that contains it .*"
                                         r"call fa3nn.unpatch_hf on that model first"):
        fa3nn.patch_hf(model.model, ignore_dropout=True)
    with pytest.raises(ValueError, match="patched through a model that contains it: call fa3nn.unpatch_hf on that"):
        fa3nn.unpatch_hf(model.model)
    assert not hasattr(model.model, "_fa3nn_previous") and torch.equal(model(input_ids).logits, patched)
    fa3nn.unpatch_hf(model)
    assert model.config._attn_implementation == model.model.config._attn_implementation == "eager"
    assert [(len(m._forward_pre_hooks), len(m._forward_hooks)) for m in model.modules()] == hooks
    assert not any(hasattr(m, LAYER_ATTRIBUTE) or hasattr(m, "_fa3nn_previous") for m in model.modules())
    assert torch.equal(model(input_ids).logits, before) and not torch.equal(patched, before)
    fa3nn.patch_hf(model.model)  # once the enclosing model is unpatched, the sub-model alone is fine
    fa3nn.unpatch_hf(model.model)
    assert model.config._attn_implementation == "eager" and torch.equal(model(input_ids).logits, before)


def test_unsupported_models_get_a_clear_error():
    with pytest.raises(UnsupportedModel, match="not a transformers PreTrainedModel.*tested: Llama"):
        fa3nn.patch_hf(torch.nn.Linear(2, 2))

    class NoInterfaceModel(transformers.PreTrainedModel):
        config_class = transformers.LlamaConfig

        @classmethod
        def _can_set_attn_implementation(cls):
            return False

        def __init__(self, config):
            super().__init__(config)
            self.proj = torch.nn.Linear(2, 2)

    with pytest.raises(UnsupportedModel, match="does not go through the AttentionInterface.*Mistral"):
        fa3nn.patch_hf(NoInterfaceModel(_config("llama")))
    with pytest.raises(ValueError, match="was not patched"):
        fa3nn.unpatch_hf(_model("llama"))


def _refused_unchanged(model, pattern: str) -> None:
    """patch_hf(model) raises UnsupportedModel matching `pattern` and leaves the model as it was (eager, no state)."""
    with pytest.raises(UnsupportedModel, match=pattern):
        fa3nn.patch_hf(model)
    assert model.config._attn_implementation == "eager" and not hasattr(model, "_fa3nn_previous")


def _refused_as_bypassing_the_interface(model) -> bool:
    """Where the model's modeling code bypasses the AttentionInterface (these models on transformers 4.x, Falcon on
    5.17 too: transformers' own _can_set_attn_implementation says so): patch_hf refuses the model as such (asserted)
    and True; False where the test goes on to the refusal it is about."""
    can_set = getattr(type(model), "_can_set_attn_implementation", None)
    if int(transformers.__version__.split(".")[0]) >= 5 and (can_set is None or can_set()):
        return False
    with pytest.raises(UnsupportedModel, match="does not go through the AttentionInterface"):
        fa3nn.patch_hf(model)
    return True


T5_SMALL = dict(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, decoder_start_token_id=0)


@pytest.mark.parametrize("family", ["T5", "MT5", "UMT5", "LongT5", "SwitchTransformers"])
def test_t5_style_position_bias_refused_at_patch_time(family):
    """T5's attention adds a learned relative position bias to the scores on every call (its own, the first layer's
    handed on, or zeros; the decoder's cross-attention too), which fa3nn cannot add: such a model was patched without
    complaint and refused only at its first forward. Its attention layers say so up front (T5's
    `has_relative_attention_bias` attribute, with `position_bias` in their forward): patch_hf refuses, naming the
    model and the layer, and changes nothing. transformers 4.x's T5 family bypasses the AttentionInterface: refused
    as such."""
    extra = dict(num_experts=2, expert_capacity=8) if family == "SwitchTransformers" else {}
    config = getattr(transformers, f"{family}Config")(**T5_SMALL, **extra)
    model = getattr(transformers, f"{family}ForConditionalGeneration")(config).eval()
    before = model.config._attn_implementation
    if _refused_as_bypassing_the_interface(model):
        return
    with pytest.raises(UnsupportedModel, match=(
            rf"fa3nn.patch_hf cannot swap the attention of {family}ForConditionalGeneration: its {family}Attention "
            r"layers add a relative position bias to the attention scores \(T5's position_bias\), which fa3nn does "
            r"not implement; keep attn_implementation='sdpa' or 'eager' for this model")):
        fa3nn.patch_hf(model)
    assert model.config._attn_implementation == before and not hasattr(model, "_fa3nn_previous")
    assert not any(hasattr(m, LAYER_ATTRIBUTE) for m in model.modules())


def test_gemma4_kv_shared_layers_with_masks():
    """Gemma 4's KV-shared layers run on the last logits_to_keep query rows, the 4D masks sliced to match, unless the
    implementation is flash or flex: fa3nn's masks cannot be sliced that way either, and a left-padded, generating or
    packed call died in Gemma 4's own code (IndexError, found by a probe in s58). A patched model keeps every row
    there (hf.QUERY_SLICER); unpatching restores the slicing."""
    if not hasattr(transformers, "Gemma4TextConfig"):
        pytest.skip(f"transformers {transformers.__version__} has no Gemma 4")
    config = transformers.Gemma4TextConfig(
        vocab_size=VOCAB, vocab_size_per_layer_input=VOCAB, hidden_size=64, hidden_size_per_layer_input=16,
        intermediate_size=96, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        sliding_window=8, layer_types=["sliding_attention", "full_attention"] * 2,
        per_layer_config={"01": {"head_dim": 32}, "03": {"head_dim": 32}}, num_kv_shared_layers=2, pad_token_id=0,
        bos_token_id=1, eos_token_id=2)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    patched = fa3nn.patch_hf(copy.deepcopy(model))
    ids = torch.randint(3, VOCAB, (2, 20))
    mask = torch.ones_like(ids)
    mask[0, :5] = 0
    packed = dict(position_ids=torch.cat([torch.arange(8), torch.arange(12)])[None], use_cache=False)
    options = dict(attention_mask=mask, max_new_tokens=6, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        torch.testing.assert_close(patched(ids, attention_mask=mask).logits[mask.bool()],
                                   model(ids, attention_mask=mask).logits[mask.bool()], atol=2e-5, rtol=0)
        torch.testing.assert_close(patched(ids[:1], **packed).logits, model(ids[:1], **packed).logits, atol=2e-5,
                                   rtol=0)
        assert torch.equal(patched.generate(ids, **options), model.generate(ids, **options))
    fa3nn.unpatch_hf(patched)
    assert not any(QUERY_SLICER in m.__dict__ for m in patched.modules())
    # selected by name there is no instance to keep the rows of: a masked call is refused by name, not an IndexError
    fa3nn.patch_hf()
    by_name = transformers.AutoModelForCausalLM.from_config(config, attn_implementation=ATTN_IMPLEMENTATION).eval()
    with torch.no_grad(), pytest.raises(NotImplementedError, match=r"call fa3nn.patch_hf\(model\) on the model"):
        by_name(ids, attention_mask=mask)


def test_doge_dynamic_mask_refused_at_patch_time():
    """Doge's attention adds a bias it computes at every call (its dynamic mask) to the scores: patched, its first
    forward died in Doge's own code on fa3nn's mask layout (found by a probe in s58). Refused at patch time, nothing
    changed."""
    if not hasattr(transformers, "DogeConfig"):
        pytest.skip(f"transformers {transformers.__version__} has no Doge")
    config = transformers.DogeConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                     num_attention_heads=4, num_key_value_heads=2)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    before = model.config._attn_implementation
    with pytest.raises(UnsupportedModel, match=r"DogeForCausalLM: its DogeAttention layers add a learned bias"):
        fa3nn.patch_hf(model)
    assert model.config._attn_implementation == before and not hasattr(model, "_fa3nn_previous")


def test_t5_selected_by_name_is_refused_at_its_first_forward():
    """The safety net: a model built with attn_implementation="fa3nn" meets no patch_hf call, so a T5 selected by name
    is refused where its attention first passes the bias (transformers 5.x; 4.x's T5 does not take the name)."""
    if int(transformers.__version__.split(".")[0]) < 5:
        pytest.skip("transformers 4.x's T5 bypasses the AttentionInterface")
    fa3nn.patch_hf()
    model = transformers.T5ForConditionalGeneration(
        transformers.T5Config(**T5_SMALL, attn_implementation=ATTN_IMPLEMENTATION)).eval()
    ids = torch.randint(0, VOCAB, (1, 6))
    with torch.no_grad(), pytest.raises(NotImplementedError, match=(
            r"T5Attention passes `position_bias` to attention, which fa3nn does not implement; use "
            r"attn_implementation='eager' for this model")):
        model(input_ids=ids, decoder_input_ids=ids)


def _window_not_handed(family: str, window: int):
    """PhiMoE (every layer sliding when config.sliding_window is set) and Qwen2-MoE (layer_types): their masks
    slide, but their attention modules do not hand sliding_window to the attention function."""
    if family == "phimoe":
        config = transformers.PhimoeConfig(**COMMON, num_local_experts=2, num_experts_per_tok=1, sliding_window=window)
        return _widen(transformers.PhimoeForCausalLM(config).eval())
    config = transformers.Qwen2MoeConfig(
        **COMMON, num_experts=2, num_experts_per_tok=1, moe_intermediate_size=32, shared_expert_intermediate_size=32,
        use_sliding_window=True, sliding_window=window, max_window_layers=0,
        layer_types=["sliding_attention", "full_attention"])
    return _widen(transformers.Qwen2MoeForCausalLM(config).eval())


@pytest.mark.parametrize("family", ["phimoe", "qwen2_moe"])
def test_a_window_the_mask_has_but_attention_is_not_handed_is_refused(family):
    """PhiMoE's and Qwen2-MoE's sliding layers get their window from the mask alone (eager, SDPA); the attention
    function is handed sliding_window=None, so fa3nn ran them unwindowed: at window 4 over 16 tokens the logits
    moved by about 1 from eager's, silently. Now such a layer is refused once its keys outnumber the window; within
    it the patched model matches eager. transformers 4.x's PhiMoE and Qwen2-MoE bypass the interface: refused as
    such."""
    ids = torch.randint(0, VOCAB, (1, SEQLEN))
    model = _window_not_handed(family, 4)
    if _refused_as_bypassing_the_interface(model):  # 4.x's PhiMoE and Qwen2-MoE
        return
    with torch.no_grad():
        eager = model(ids).logits
        wide = _window_not_handed(family, 4096)
        wide.load_state_dict(model.state_dict())
        assert (wide(ids).logits - eager).abs().max() > 0.1  # the window matters for these inputs
    layer = "PhimoeAttention" if family == "phimoe" else "Qwen2MoeAttention"
    with torch.no_grad(), pytest.raises(NotImplementedError, match=(
            rf"{layer} \(layer 0\) gets a sliding window of 4 from the model's mask \(config.sliding_window\) "
            r"but is not handed it \(sliding_window=None\): fa3nn would attend to all 16 keys; use "
            r"attn_implementation='sdpa' or 'eager' for sequences longer than the window")):
        fa3nn.patch_hf(copy.deepcopy(model))(ids)
    short = ids[:, :4]
    with torch.no_grad():
        torch.testing.assert_close(fa3nn.patch_hf(copy.deepcopy(model))(short).logits, model(short).logits)


def _sparse_attention_model(family: str, by_name: bool = False):
    """Tiny models whose attention attends to keys an indexer selects and hands the selection to attention functions
    other than eager / SDPA as `block_indices` (MiniMax-M3: top-k blocks of 4 keys) or `indices` (DeepSeek-V3.2's
    DeepSeek Sparse Attention: top-4 keys); eager and SDPA fold it into their mask."""
    if family == "minimax_m3":
        if not hasattr(transformers, "MiniMaxM3VLTextConfig"):
            pytest.skip(f"transformers {transformers.__version__} has no MiniMax-M3")
        config = transformers.MiniMaxM3VLTextConfig(
            **{**COMMON, "intermediate_size": 48}, head_dim=16, num_experts_per_tok=1, num_local_experts=2,
            dense_intermediate_size=48, shared_intermediate_size=32, rotary_dim=8, mlp_layer_types=["dense"] * 2,
            index_n_heads=2, index_head_dim=8, index_block_size=4, index_topk_blocks=2, index_local_blocks=1,
            layer_types=["minimax_m3_sparse"] * 2, pad_token_id=0, bos_token_id=1, eos_token_id=2)
        model_class = transformers.MiniMaxM3VLForCausalLM
    else:
        if not hasattr(transformers, "DeepseekV32Config"):
            pytest.skip(f"transformers {transformers.__version__} has no DeepSeek-V3.2")
        config = transformers.DeepseekV32Config(
            **{**COMMON, "num_key_value_heads": 4}, moe_intermediate_size=32, n_routed_experts=4, num_experts_per_tok=2,
            n_shared_experts=1, first_k_dense_replace=2, q_lora_rank=32, kv_lora_rank=32, qk_rope_head_dim=8,
            qk_nope_head_dim=16, v_head_dim=16, head_dim=24, n_group=1, topk_group=1, index_topk=4,
            index_head_dim=16, index_n_heads=2, pad_token_id=0, bos_token_id=1, eos_token_id=2)
        model_class = transformers.DeepseekV32ForCausalLM
    if by_name:
        config._attn_implementation = ATTN_IMPLEMENTATION
    torch.manual_seed(0)
    return _widen(model_class(config).eval())


@pytest.mark.parametrize("family", ["minimax_m3", "deepseek_v32"])
def test_sparse_attention_models_are_refused(family):
    """Sparse attention (an indexer picks the keys each query attends to) reaches fa3nn as `block_indices` /
    `indices`, which it ignored: a patched MiniMax-M3 ran dense attention, its logits 0.43 from eager's at 32 tokens,
    silently; DeepSeek-V3.2's indexer died in its own code on fa3nn's mask (IndexError: too many indices for tensor
    of dimension 3). patch_hf refuses both, naming the layer and changing nothing; a MiniMax-M3 selected by name is
    refused at its first forward."""
    model = _sparse_attention_model(family)
    layer = {"minimax_m3": "MiniMaxM3VLAttention", "deepseek_v32": "DeepseekV32Attention"}[family]
    argument = {"minimax_m3": "block_indices", "deepseek_v32": "indices"}[family]
    ids = torch.randint(3, VOCAB, (1, 32))
    with torch.no_grad():
        before = model(ids).logits
    _refused_unchanged(model, (
        rf"fa3nn.patch_hf cannot swap the attention of {type(model).__name__}: its {layer} layers hand the "
        rf"attention function `{argument}` \(sparse attention: the keys an indexer selects\), which fa3nn does "
        r"not implement; keep attn_implementation='sdpa' or 'eager' for this model"))
    assert not any(hasattr(m, LAYER_ATTRIBUTE) for m in model.modules())
    with torch.no_grad():
        assert torch.equal(model(ids).logits, before)
    if family == "minimax_m3":
        fa3nn.patch_hf()
        by_name = _sparse_attention_model(family, by_name=True)
        with torch.no_grad(), pytest.raises(NotImplementedError, match=(
                r"MiniMaxM3VLAttention passes `block_indices` to attention, which fa3nn does not implement; use "
                r"attn_implementation='eager' for this model")):
            by_name(ids)


def test_falcon_alibi_refused_at_patch_time():
    """Falcon with alibi=True adds its ALiBi bias onto the 4D mask transformers builds; patched, that mask is
    fa3nn's layout, and the first forward died inside Falcon's code (RuntimeError: The size of tensor a (10) must
    match the size of tensor b (4)). patch_hf refuses it up front and changes nothing; Falcon without ALiBi is
    patched and matches eager. transformers 4.x's Falcon bypasses the interface: refused as such."""
    def falcon(alibi):
        config = transformers.FalconConfig(vocab_size=VOCAB, hidden_size=64, num_attention_heads=4,
                                           num_hidden_layers=2, alibi=alibi, attn_implementation="eager")
        torch.manual_seed(0)
        return transformers.FalconForCausalLM(config).eval()

    model = falcon(True)
    if _refused_as_bypassing_the_interface(model):  # 4.x's Falcon
        return
    _refused_unchanged(model, (
        r"fa3nn.patch_hf cannot swap the attention of FalconForCausalLM: its config sets alibi=True \(ALiBi "
        r"position biases added to the attention mask\), which fa3nn does not implement; keep "
        r"attn_implementation='sdpa' or 'eager' for this model"))
    ids = torch.randint(0, VOCAB, (2, SEQLEN))
    model = falcon(False)
    with torch.no_grad():
        eager = model(ids).logits
        torch.testing.assert_close(fa3nn.patch_hf(model)(ids).logits, eager)


def test_test_inputs_exercise_window_and_softcap():
    """Guards the tests above: with these sizes the sliding window and the softcap change the eager output."""
    ids = torch.randint(0, VOCAB, (1, SEQLEN))
    mistral, gemma2 = _model("mistral"), _model("gemma2")
    with torch.no_grad():
        windowed, softcapped = mistral(ids).logits, gemma2(ids).logits
        mistral.config.sliding_window = None
        for layer in gemma2.model.layers:
            layer.self_attn.attn_logit_softcapping = None
        assert (mistral(ids).logits - windowed).abs().max() > 1e-3
        assert (gemma2(ids).logits - softcapped).abs().max() > 1e-3


@pytest.mark.parametrize("family", ["qwen3", "gemma3", "granite", "gpt_oss", "llama4"])
def test_newer_families_exercise_their_feature(family):
    """Guards the tests above for the families added on 2026-12-05: the same weights without the family's feature
    (Qwen3's and Gemma-3's windows, widened past the sequence with the same layer types, so that Gemma-3's local RoPE
    base stays; Granite's attention_multiplier as the softmax scale, 0.05 here against head dim 16's 0.25; gpt-oss's
    sinks; Llama 4's chunks, widened past the sequence) give another eager output."""
    ids = torch.randint(0, VOCAB, (1, SEQLEN))
    model = _model(family)
    config = copy.deepcopy(model.config)
    if family == "granite":
        config.attention_multiplier = 16**-0.5
    elif family == "llama4":
        config.attention_chunk_size = 4096
    elif family != "gpt_oss":
        config.sliding_window = 4096
    plain = getattr(transformers, MODEL_CLASSES[family])(config).eval()
    plain.load_state_dict(model.state_dict())
    if family == "gpt_oss":  # without its sinks (a logit of -inf takes no share of the softmax)
        with torch.no_grad():
            for layer in plain.model.layers:
                layer.self_attn.sinks.fill_(float("-inf"))
    with torch.no_grad():
        assert (model(ids).logits - plain(ids).logits).abs().max() > 1e-3


def test_autocast_bf16_matches_eager():
    """Under autocast, rotary embeddings leave q/k in float32 and v in bfloat16: fa3nn runs them in the autocast
    dtype (as transformers' flash path does). pt = eager under the same autocast."""
    input_ids = torch.randint(0, VOCAB, (2, SEQLEN))
    model = _model("llama")
    ref = _run(copy.deepcopy(model), input_ids, torch.float64)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        pt = _run(copy.deepcopy(model), input_ids, torch.float32)
        actual = _run(fa3nn.patch_hf(model), input_ids, torch.float32)
    _assert_matches(actual, ref, pt)


def test_patch_options_checked_before_anything_is_registered():
    """A bad option used to be registered first (a bogus backend then broke every later fa3nn model), a truthy
    ignore_dropout silently turned dropout off, and fp8 without a model was dropped."""
    from fa3nn.integrations import hf

    fa3nn.patch_hf()
    before = hf._defaults
    with pytest.raises(ValueError, match=r"backend must be one of"):
        fa3nn.patch_hf(_model("llama"), backend="bogus")
    with pytest.raises(TypeError, match=r"ignore_dropout must be a bool \(True or False\), got str 'no'"):
        fa3nn.patch_hf(ignore_dropout="no")
    with pytest.raises(TypeError, match=r"deterministic must be a bool"):
        fa3nn.patch_hf(deterministic="yes")
    with pytest.raises(ValueError, match=r"unknown FP8 recipe name 'bogus'"):
        fa3nn.patch_hf(fp8="bogus")
    with pytest.raises(ValueError, match=r"patch_hf\(fp8=\.\.\.\) attaches one FP8 layer per attention module"):
        fa3nn.patch_hf(fp8="per_tile")
    assert hf._defaults == before


def test_masks_fa3nn_cannot_honor_raise():
    """A 4D mask a caller builds reaches the attention function as it is (transformers skips the mask function for
    it): it crashed with an IndexError. A mask shorter than the input cut the keys and zeroed the last queries."""
    model = fa3nn.patch_hf(_model("llama"))
    ids = torch.randint(0, VOCAB, (2, 8))
    with pytest.raises(ValueError, match=r"takes a 2D padding mask \(batch, seqlen\), got shape \(2, 1, 8, 8\)"):
        model(ids, attention_mask=torch.ones(2, 1, 8, 8))
    with pytest.raises(ValueError, match=r"the padding mask covers 5 positions but the input has 8 query tokens"):
        model(ids, attention_mask=torch.ones(2, 5, dtype=torch.long))


def test_sub_model_the_setter_skips_is_refused_and_nothing_changes():
    """transformers leaves a sub-model whose attention bypasses the AttentionInterface (TrOCR's decoder) as it was;
    forcing its config to "fa3nn" sent its mask creation to fa3nn's padding-only mask function while its eager
    attention ran: no causal mask (the first token's logits moved with the last token). patch_hf refuses such a
    model and leaves every config as it found it."""
    encoder = transformers.ViTConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=64)
    decoder = transformers.TrOCRConfig(vocab_size=50, d_model=32, decoder_layers=1, decoder_attention_heads=2,
                                       decoder_ffn_dim=64, is_decoder=True, add_cross_attention=True,
                                       max_position_embeddings=64)
    config = transformers.VisionEncoderDecoderConfig.from_encoder_decoder_configs(encoder, decoder)
    config.decoder_start_token_id, config.pad_token_id = 0, 1
    model = transformers.VisionEncoderDecoderModel(config).eval()
    before = [c._attn_implementation_internal for c in (model.config, model.config.encoder, model.config.decoder)]
    pixels, ids = torch.randn(1, 3, 32, 32), torch.randint(2, 50, (1, 8))
    with torch.no_grad():
        ref = model(pixel_values=pixels, decoder_input_ids=ids).logits
    with pytest.raises(UnsupportedModel, match=r"its sub-model TrOCR\w* kept attn_implementation="):
        fa3nn.patch_hf(model)
    after = [c._attn_implementation_internal for c in (model.config, model.config.encoder, model.config.decoder)]
    assert after == before and not hasattr(model, "_fa3nn_previous")
    with torch.no_grad():
        assert torch.equal(model(pixel_values=pixels, decoder_input_ids=ids).logits, ref)


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["packed", "left padding", "images"])
def test_patched_on_the_gpu(case):
    """patch_hf on CUDA in bf16 through auto's backends (head dim 16: Triton's kernels, the native ones take 64 /
    128 / 256; tests/test_hf_mask_probe.py's GPU test runs head dim 64): transformers' masks read on the GPU (the
    layout's vmapped mask functions over CUDA tensors), packed position_ids without a cache, left padding, Gemma 3's
    image blocks.
    Logits of the real tokens by the error-ratio rule: the bf16 model patched against eager in float64, eager's own
    bf16 model as the yardstick (the same weights)."""
    cuda = torch.device("cuda")
    torch.manual_seed(0)
    model = (_gemma3_vlm() if case == "images" else _model("llama")).to(cuda)
    ids = torch.randint(4, VOCAB - 4, (2, 2 * SEQLEN), device=cuda)
    real = torch.ones_like(ids, dtype=torch.bool)
    inputs = dict(input_ids=ids, use_cache=False)
    if case == "packed":
        inputs["position_ids"] = torch.cat([torch.arange(n, device=cuda) for n in (7, 13, 12)])[None].expand(2, -1)
    elif case == "left padding":
        real[1, :9] = False
        inputs["attention_mask"] = real.long()
    else:
        ids[0, 5:9] = ids[1, 20:24] = VOCAB - 1
        inputs.update(token_type_ids=(ids == VOCAB - 1).long(), pixel_values=torch.randn(2, 3, 16, 16, device=cuda))

    def logits(m, dtype):  # in the model's dtype: the error-ratio rule takes bf16's noise floor from it
        with torch.no_grad():
            batch = {n: x.to(dtype) if torch.is_tensor(x) and x.is_floating_point() else x for n, x in inputs.items()}
            return m.to(dtype)(**batch).logits[real]

    def per_row(m, dtype):  # under padding: each row's real tokens alone (eager's float64 padded rows turn to NaN)
        with torch.no_grad():
            m = m.to(dtype)
            positions = torch.arange(ids.shape[1], device=cuda)
            return torch.cat([m(ids[r:r + 1, real[r]], position_ids=positions[real[r]][None]).logits[0]
                              for r in range(2)])

    reference = per_row if case == "left padding" else logits
    ref, eager_bf16 = reference(copy.deepcopy(model), torch.float64), reference(copy.deepcopy(model), torch.bfloat16)
    actual = logits(fa3nn.patch_hf(model), torch.bfloat16)
    assert_error_ratio(actual, ref, eager_bf16, f"{case}: logits (bf16 model, eager bf16 as the yardstick)")
