"""torch.compile of a model patched with fa3nn.patch_hf: the graph breaks fa3nn adds, and its refusals compiled.

Graph breaks are counted with torch._dynamo.explain (backend-free: nothing is compiled by Inductor) on a tiny random
Llama (2 layers, hidden 64, CPU, reference backend), against the same model under SDPA. Before the forty-sixth
session's helper, each call's sliding-window refusal read the layer's source with inspect (through functools.cache,
which Dynamo traces through): 9 graph breaks on a compiled decode step where SDPA has none, and breaks of its own on a
training step (benchmarks/NOTES.md, "torch.compile graph breaks of a patched model").
"""

from __future__ import annotations

import copy
import inspect
import os

import pytest
import torch

transformers = pytest.importorskip("transformers")
dynamo = pytest.importorskip("torch._dynamo")

import fa3nn  # noqa: E402

FA3NN_DIR = os.path.dirname(fa3nn.__file__) + os.sep


def _llama(attn_implementation: str = "sdpa"):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, attn_implementation=attn_implementation)
    return transformers.LlamaForCausalLM(config)


def _fa3nn_break_files(explanation) -> set[str]:
    """The fa3nn files in which the reported graph breaks happen (the innermost fa3nn frame of each break's stack)."""
    files = set()
    for reason in explanation.break_reasons:
        own = [frame.filename for frame in reason.user_stack if frame.filename.startswith(FA3NN_DIR)]
        if own:
            files.add(os.path.relpath(own[-1], FA3NN_DIR))
    return files


def test_a_compiled_decode_step_breaks_the_graph_no_more_than_sdpa():
    """One decode step (one token per row after a 16-token prompt, dynamic cache): SDPA traces it as one graph, and
    so does the patched model (9 breaks before, all from inspect in refuse_a_window_not_handed, once per layer);
    the logits are the eager ones."""
    prompt = torch.randint(0, 128, (2, 16))
    breaks, logits = {}, {}
    for name in ("sdpa", "fa3nn"):
        model = _llama().eval()
        if name == "fa3nn":
            fa3nn.patch_hf(model)
        # the cache's name: 'cache' (transformers 5.25), 'past_key_values' (4.x, 5.17)
        argument = "cache" if "cache" in inspect.signature(type(model).forward).parameters else "past_key_values"
        with torch.no_grad():
            cache = model(input_ids=prompt, use_cache=True)[argument]
            eager_cache = copy.deepcopy(cache)
            step = lambda token, cached={argument: cache}, model=model: model(  # noqa: E731
                input_ids=token, use_cache=True, **cached).logits
            explanation = dynamo.explain(step)(prompt[:, -1:])
            breaks[name] = (explanation.graph_break_count, _fa3nn_break_files(explanation))
            logits[name] = model(input_ids=prompt[:, -1:], use_cache=True, **{argument: eager_cache}).logits
    assert breaks["fa3nn"] == breaks["sdpa"] == (0, set())
    torch.testing.assert_close(logits["fa3nn"], logits["sdpa"])


def test_a_compiled_training_step_breaks_only_at_the_boundary_reads():
    """A forward and backward of the patched Llama: the only graph breaks in fa3nn's files are its memo lookups
    (fa3nn/memo.py: whether the position_ids restart, read on the host once per tensor, decides whether the call is
    packed, so it cannot be traced; transformers' flash_attention_2 reads them too). Before, each layer's
    sliding-window refusal broke the graph in integrations/hf_refusals.py. Loss and gradients compiled are the eager
    ones."""
    ids = torch.randint(0, 128, (2, 16))
    eager_model = fa3nn.patch_hf(_llama())
    compiled_model = copy.deepcopy(eager_model)

    def step(model):
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        return loss.detach()

    explanation = dynamo.explain(step)(copy.deepcopy(eager_model))
    assert _fa3nn_break_files(explanation) == {"memo.py"}
    got = torch.compile(step, backend="eager")(compiled_model)
    eager_model.zero_grad()
    expected = step(eager_model)
    torch.testing.assert_close(got, expected)
    for (name, p), q in zip(compiled_model.named_parameters(), eager_model.parameters()):
        torch.testing.assert_close(p.grad, q.grad, msg=name)


def test_a_window_not_handed_is_refused_compiled_with_the_eager_message():
    """PhiMoE's layers get their window from the mask alone: refused per call, compiled as eagerly, with one message.
    The fact read from the layer's source is read at patch time (class_fact), so the compiled call finds it as a
    constant."""
    config = transformers.PhimoeConfig(
        vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, num_local_experts=2, num_experts_per_tok=1,
        sliding_window=4, attn_implementation="sdpa")
    model = transformers.PhimoeForCausalLM(config).eval()
    if not hasattr(model, "set_attn_implementation"):  # 4.x's PhiMoE bypasses the interface
        pytest.skip("transformers 4.x's PhiMoE is refused as bypassing the AttentionInterface")
    fa3nn.patch_hf(model)
    ids = torch.randint(0, 128, (1, 16))
    message = (r"PhimoeAttention \(layer 0\) gets a sliding window of 4 from the model's mask "
               r"\(config.sliding_window\) but is not handed it \(sliding_window=None\): "
               r"fa3nn would attend to all 16 keys")
    with torch.no_grad():
        with pytest.raises(NotImplementedError, match=message):
            model(ids)
        with pytest.raises(NotImplementedError, match=message):
            torch.compile(model, backend="eager")(ids)

