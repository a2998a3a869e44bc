"""fa3nn.integrations.hf_refusals on stand-in modules (no transformers model needed): each refusal's trigger, its
message, and what it lets through. tests/test_hf.py checks the same refusals on real transformers models.

The stand-in attention layers live in this file, whose source names create_sliding_window_causal_mask: a modeling
file that builds sliding masks, as builds_sliding_masks reads it."""

from types import SimpleNamespace

import pytest
from torch import nn

from fa3nn.integrations import hf, hf_refusals
from fa3nn.integrations.hf_refusals import (
    UnsupportedModel,
    adds_position_bias,
    builds_sliding_masks,
    refuse_a_window_not_handed,
    refuse_position_biases,
    refuse_sparse_attention,
    refuse_unsupported_arguments,
    sparse_index_argument,
)


class BiasedAttention(nn.Module):
    """T5's shape: the flag, and position_bias handed to the attention function."""

    has_relative_attention_bias = False

    def forward(self, hidden_states, position_bias=None):
        return hidden_states if position_bias is None else hidden_states + position_bias


class PlainAttention(nn.Module):
    def forward(self, hidden_states, sliding_window=None):
        return hidden_states


class WindowlessAttention(nn.Module):
    """PhiMoE's shape (transformers 5.25): its mask slides, its forward hands attention no window."""

    def __init__(self, sliding_window, layer_idx=None, layer_types=None):
        super().__init__()
        self.config = SimpleNamespace(sliding_window=sliding_window, layer_types=layer_types)
        self.layer_idx = layer_idx

    def forward(self, hidden_states):
        return hidden_states


class SparseAttention(nn.Module):
    """MiniMax-M3's shape: the indexer's selection handed to the attention function by keyword."""

    def forward(self, hidden_states, attention_interface=None):
        block_indices = hidden_states.argmax(-1)
        return attention_interface(hidden_states, block_indices=block_indices)


class DynamicMaskAttention(nn.Module):
    """Doge's shape: a bias computed from the inputs at every call, added to the mask the attention function gets."""

    def prepare_dynamic_mask(self, hidden_states, attention_mask):
        return attention_mask + hidden_states.mean()

    def forward(self, hidden_states, attention_mask=None):
        return hidden_states + self.prepare_dynamic_mask(hidden_states, attention_mask)


class FalconLike(nn.Module):
    pass


def test_alibi_and_relative_position_bias_are_refused_at_patch_time():
    model, plain = FalconLike(), [PlainAttention()]
    with pytest.raises(UnsupportedModel) as alibi:
        refuse_position_biases(model, plain, [SimpleNamespace(alibi=False), SimpleNamespace(alibi=True)])
    assert str(alibi.value) == (
        "fa3nn.patch_hf cannot swap the attention of FalconLike: its config sets alibi=True (ALiBi position biases "
        "added to the attention mask), which fa3nn does not implement; keep attn_implementation='sdpa' or 'eager' for "
        "this model")
    with pytest.raises(UnsupportedModel) as biased:
        refuse_position_biases(model, [PlainAttention(), BiasedAttention()], [SimpleNamespace(alibi=False)])
    assert str(biased.value) == (
        "fa3nn.patch_hf cannot swap the attention of FalconLike: its BiasedAttention layers add a relative position "
        "bias to the attention scores (T5's position_bias), which fa3nn does not implement; keep "
        "attn_implementation='sdpa' or 'eager' for this model")
    with pytest.raises(UnsupportedModel) as dynamic:
        refuse_position_biases(model, [PlainAttention(), DynamicMaskAttention()], [SimpleNamespace(alibi=False)])
    assert str(dynamic.value) == (
        "fa3nn.patch_hf cannot swap the attention of FalconLike: its DynamicMaskAttention layers add a learned bias "
        "to the attention scores (prepare_dynamic_mask: Doge's dynamic mask), which fa3nn does not implement; keep "
        "attn_implementation='sdpa' or 'eager' for this model")
    assert refuse_position_biases(model, plain, [SimpleNamespace(alibi=None), SimpleNamespace()]) is None
    assert (adds_position_bias(BiasedAttention()), adds_position_bias(PlainAttention())) == (True, False)


def test_sparse_attention_is_refused_at_patch_time():
    model = FalconLike()
    with pytest.raises(UnsupportedModel) as sparse:
        refuse_sparse_attention(model, [PlainAttention(), SparseAttention()])
    assert str(sparse.value) == (
        "fa3nn.patch_hf cannot swap the attention of FalconLike: its SparseAttention layers hand the attention "
        "function `block_indices` (sparse attention: the keys an indexer selects), which fa3nn does not implement; "
        "keep attn_implementation='sdpa' or 'eager' for this model")
    assert refuse_sparse_attention(model, [PlainAttention(), BiasedAttention()]) is None
    # a local variable of that name is not a keyword handed on
    assert (sparse_index_argument(SparseAttention), sparse_index_argument(PlainAttention)) == ("block_indices", None)


def test_a_window_the_layer_is_not_handed_is_refused_past_the_window():
    assert builds_sliding_masks(WindowlessAttention) and builds_sliding_masks(PlainAttention)
    with pytest.raises(NotImplementedError) as refused:
        refuse_a_window_not_handed(WindowlessAttention(4, layer_idx=1), 16)
    assert str(refused.value) == (
        "WindowlessAttention (layer 1) gets a sliding window of 4 from the model's mask (config.sliding_window) but is "
        "not handed it (sliding_window=None): fa3nn would attend to all 16 keys; use attn_implementation='sdpa' or "
        "'eager' for sequences longer than the window")
    refuse_a_window_not_handed(WindowlessAttention(4, layer_idx=1), 4)  # every key in view
    refuse_a_window_not_handed(WindowlessAttention(None), 16)  # no window
    refuse_a_window_not_handed(WindowlessAttention(4, 0, ["full_attention", "sliding_attention"]), 16)  # a full layer
    refuse_a_window_not_handed(PlainAttention(), 16)  # its forward passes the window on
    with pytest.raises(NotImplementedError, match=r"^WindowlessAttention \(layer 1\) gets a sliding window of 4 "):
        refuse_a_window_not_handed(WindowlessAttention(4, 1, ["full_attention", "sliding_attention"]), 16)


def test_a_class_first_met_compiled_is_read_and_refused():
    """A layer class whose source facts patch_hf did not read (a model selected by name) is read at its first
    compiled call (a graph break there: inspect cannot be traced) and refused with the eager message."""
    import torch

    hf_refusals.may_miss_its_window.cache_clear()
    layer = WindowlessAttention(4, layer_idx=1)
    with pytest.raises(NotImplementedError, match=r"^WindowlessAttention \(layer 1\) gets a sliding window of 4 "):
        torch.compile(lambda x: hf_refusals.refuse_a_window_not_handed(layer, x.shape[0]) or x,
                      backend="eager")(torch.zeros(16))
    compiled = torch.compile(lambda x: hf_refusals.refuse_a_window_not_handed(PlainAttention(), x.shape[0]) or x,
                             backend="eager", fullgraph=True)  # read before: a constant of the graph
    hf_refusals.may_miss_its_window(PlainAttention)
    assert compiled(torch.ones(16)).sum() == 16


def test_dropout_and_arguments_without_a_counterpart_are_refused_per_call():
    layer = PlainAttention()
    with pytest.raises(ValueError) as dropout:
        refuse_unsupported_arguments(layer, 0.1, False, {})
    assert str(dropout.value) == (
        "attention dropout 0.1 is set on PlainAttention, but FlashAttention-3 has no dropout. Set "
        "config.attention_dropout = 0.0, or call fa3nn.patch_hf(..., ignore_dropout=True) to train without it")
    refuse_unsupported_arguments(layer, 0.1, True, {"sinks": None, "position_bias": None, "indices": None})
    for argument in ("sinks", "position_bias", "indices", "block_indices"):
        with pytest.raises(NotImplementedError) as passed:
            refuse_unsupported_arguments(layer, 0.0, False, {argument: 1.0})
        assert str(passed.value) == (f"PlainAttention passes `{argument}` to attention, which fa3nn does not "
                                     "implement; use attn_implementation='eager' for this model")


def test_hf_keeps_the_moved_names():
    """UnsupportedModel is what patch_hf raises, imported from hf; _PackingWatch is the class path that patched models
    torch.save'd before the move pickled, so they still load."""
    assert hf.UnsupportedModel is hf_refusals.UnsupportedModel
    assert hf._PackingWatch is hf_refusals.PackingWatch
