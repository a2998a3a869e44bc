"""What patch_hf and fa3nn's attention function refuse rather than run: models and calls that fa3nn would attend
over silently wrong, or that would die obscurely inside the model's own code. Each refusal names the model or the
layer and says what to use instead.

At patch time (fa3nn.integrations.hf._check_model): a model that is no transformers model or bypasses the
AttentionInterface (`unsupported`), position biases added to the scores, which fa3nn does not implement
(`refuse_position_biases`: Falcon's ALiBi, T5's relative bias), and sparse attention over the keys an indexer selects
(`refuse_sparse_attention`: DeepSeek-V3.2's family, MiniMax-M3).

At each call (fa3nn.integrations.hf.fa3nn_attention_forward): attention dropout and the `sinks` / `position_bias` /
sparse-index arguments fa3nn has no counterpart for (`refuse_unsupported_arguments`), a sliding window the model's
mask applies but the layer is not handed (`refuse_a_window_not_handed`), and packed position_ids a layer is not
handed (`PackingWatch`, `refuse_unseen_packing`).
"""

from __future__ import annotations

import ast
import functools
import inspect
import sys
import textwrap
import threading

from torch import nn

from fa3nn.integrations.hf_padding import pack_by_position_ids

TESTED_FAMILIES = (
    "Llama", "Mistral", "Qwen2", "Gemma-2", "Qwen3", "Gemma-3", "Phi-3", "Granite", "OLMo-2", "Starcoder2", "gpt-oss",
    "Mixtral", "DeepSeek-V3", "Llama 4 (text)", "Cohere2", "Gemma-3 (images)", "BART", "CLIP (text)", "SigLIP (text)",
    "ModernBERT",
)


def class_fact(read):
    """functools.cache for what a class's source or signature says, in a form torch.compile reads as a constant.
    Under torch.compile Dynamo ignores functools.cache's wrapper and traces the function itself, into inspect, which
    it cannot trace: the per-call window refusal broke the graph once per layer (a 2-layer Llama's compiled decode
    step: 9 graph breaks, against none under SDPA; benchmarks/NOTES.md, "forty-sixth session, helper"). A plain dict
    lookup it traces as a constant, guarded on the dict's keys; so patch_hf reads at patch time every fact a patched
    model's calls ask for (read_class_facts), and only a class first met under torch.compile (a model selected by
    name) breaks the graph, at that call, to read it."""
    facts = {}

    @functools.wraps(read)
    def cached(*args):
        if args not in facts:
            facts[args] = read(*args)
        return facts[args]

    cached.cache_clear = facts.clear
    return cached


class UnsupportedModel(TypeError):
    """The model does not route its attention through transformers' AttentionInterface."""


def unsupported(model: nn.Module, why: str) -> UnsupportedModel:
    return UnsupportedModel(
        f"fa3nn.patch_hf cannot swap the attention of {type(model).__name__}: {why}. It supports transformers "
        "models whose attention layers call transformers' AttentionInterface (ALL_ATTENTION_FUNCTIONS.get_interface), "
        f"as most decoder LLMs' do (tested: {', '.join(TESTED_FAMILIES)}). "
        "For another model, call fa3nn.flash_attn_func from its attention module yourself"
    )


def refuse_position_biases(model: nn.Module, layers: list[nn.Module], configs: list) -> None:
    """A model whose attention adds position biases to the scores, known before any forward: ALiBi in any of its
    configs, or attention layers that add T5's relative bias (adds_position_bias)."""
    # Falcon's ALiBi is added onto the 4D mask transformers builds, which fa3nn's mask function replaces: the first
    # forward died in Falcon's own code on a shape mismatch. (Falcon is the AttentionInterface model with config.alibi;
    # transformers refuses flash attention for it the same way.)
    if any(getattr(config, "alibi", None) is True for config in configs):
        raise UnsupportedModel(
            f"fa3nn.patch_hf cannot swap the attention of {type(model).__name__}: its config sets alibi=True (ALiBi "
            "position biases added to the attention mask), which fa3nn does not implement; keep "
            "attn_implementation='sdpa' or 'eager' for this model"
        )
    biased = next((layer for layer in layers if adds_position_bias(layer)), None)
    if biased is not None:
        raise UnsupportedModel(
            f"fa3nn.patch_hf cannot swap the attention of {type(model).__name__}: its {type(biased).__name__} layers "
            "add a relative position bias to the attention scores (T5's position_bias), which fa3nn does not "
            "implement; keep attn_implementation='sdpa' or 'eager' for this model"
        )
    # Doge's attention adds a bias it computes from the values at every call (its dynamic mask) onto the 4D mask
    # transformers builds: patched, the first forward died in Doge's own code (IndexError on fa3nn's mask layout).
    dynamic = next((layer for layer in layers if forward_mentions(type(layer), DYNAMIC_MASK_METHOD)), None)
    if dynamic is not None:
        raise UnsupportedModel(
            f"fa3nn.patch_hf cannot swap the attention of {type(model).__name__}: its {type(dynamic).__name__} layers "
            f"add a learned bias to the attention scores ({DYNAMIC_MASK_METHOD}: Doge's dynamic mask), which fa3nn "
            "does not implement; keep attn_implementation='sdpa' or 'eager' for this model"
        )


DYNAMIC_MASK_METHOD = "prepare_dynamic_mask"  # (transformers 5.25's Doge; its forward calls self.<this>)


# Keyword arguments by which attention layers hand an attention function the keys each query attends to, selected by
# an indexer (transformers 5.x): DeepSeek-V3.2's DeepSeek Sparse Attention and its copies (GLM-MoE-DSA, Mistral-Large-4,
# AXK2, HY-V4, Dots3-Note: `indices`, top-k keys per query) and MiniMax-M3 (`block_indices`, top-k key blocks). eager
# and SDPA fold the selection into their mask; other implementations get it by these names, which fa3nn ignored.
SPARSE_INDEX_ARGUMENTS = ("indices", "block_indices")


def refuse_sparse_attention(model: nn.Module, layers: list[nn.Module]) -> None:
    """A model whose attention layers hand the attention function the keys an indexer selects (sparse attention),
    known before any forward from their forward's source: fa3nn would attend to every key (MiniMax-M3: logits 0.43
    off at 32 tokens, silently), and DeepSeek-V3.2's indexer reads a 4D mask fa3nn's mask function does not make (it
    died in the model's own code: IndexError: too many indices for tensor of dimension 3)."""
    for layer in layers:
        argument = sparse_index_argument(type(layer))
        if argument is not None:
            raise UnsupportedModel(
                f"fa3nn.patch_hf cannot swap the attention of {type(model).__name__}: its {type(layer).__name__} "
                f"layers hand the attention function `{argument}` (sparse attention: the keys an indexer selects), "
                "which fa3nn does not implement; keep attn_implementation='sdpa' or 'eager' for this model"
            )


@class_fact
def sparse_index_argument(cls: type) -> str | None:
    """The first of SPARSE_INDEX_ARGUMENTS that cls.forward passes by keyword to a call, or None (also without
    source: the per-call refusal in refuse_unsupported_arguments remains)."""
    source = forward_source(cls)
    if source is None:
        return None
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return None
    passed = {keyword.arg for node in ast.walk(tree) if isinstance(node, ast.Call) for keyword in node.keywords}
    return next((name for name in SPARSE_INDEX_ARGUMENTS if name in passed), None)


def adds_position_bias(layer: nn.Module) -> bool:
    """Whether an attention layer adds a position bias to its scores on every call, known before any forward: T5's
    attention and its copies (mT5, UMT5, LongT5, Switch Transformers, Pix2Struct's text, UDOP, Pop2Piano in
    transformers 5.x) hold `has_relative_attention_bias` and pass `position_bias` (their own relative bias, the first
    layer's handed on, or zeros) to the attention function at every call, cross-attention included.

    transformers' class flags do not say it (5.25): `_supports_flash_attn` is False on Llama 4, which fa3nn serves,
    and `_supports_attention_backend` False on BART, served too; config.model_type would need a list kept by hand.
    Other models pass a bias only under some configs (Wav2Vec2-Conformer's, Wav2Vec2-BERT's and SeamlessM4T's
    speech encoders with position_embeddings_type="relative", LayoutLMv3's encoder with has_relative_attention_bias
    or has_spatial_attention_bias): nothing on their attention layers tells, so they are refused at the first
    forward that passes one (fa3nn_attention_forward), as is any model selected by name."""
    return isinstance(getattr(layer, "has_relative_attention_bias", None), bool) and forward_mentions(
        type(layer), "position_bias")


@class_fact
def forward_source(cls: type) -> str | None:
    """The source of cls.forward, or None without one (compiled, built at run time): forward_mentions and
    sparse_index_argument read it."""
    try:
        return inspect.getsource(cls.forward)
    except (OSError, TypeError):
        return None


@class_fact
def forward_mentions(cls: type, name: str) -> bool:
    """Whether `name` appears in the source of cls.forward; False without source: then only the attribute rules
    apply (`scaling` for hf._attention_layers, none for adds_position_bias)."""
    source = forward_source(cls)
    return source is not None and name in source


def refuse_unsupported_arguments(module: nn.Module, dropout, ignore_dropout: bool, kwargs: dict) -> None:
    """What a layer hands attention that fa3nn has no counterpart for: dropout (unless patch_hf's ignore_dropout),
    attention sinks under that name, a position bias (models that pass one only under some configs, or any model
    selected by name: adds_position_bias), the keys of sparse attention (a model selected by name:
    refuse_sparse_attention)."""
    if dropout and dropout > 0 and not ignore_dropout:
        raise ValueError(
            f"attention dropout {dropout} is set on {type(module).__name__}, but FlashAttention-3 has no dropout. "
            "Set config.attention_dropout = 0.0, or call fa3nn.patch_hf(..., ignore_dropout=True) to train without it"
        )
    for argument in ("sinks", "position_bias", *SPARSE_INDEX_ARGUMENTS):
        if kwargs.get(argument) is not None:
            raise NotImplementedError(
                f"{type(module).__name__} passes `{argument}` to attention, which fa3nn does not implement; "
                "use attn_implementation='eager' for this model"
            )


def refuse_a_window_not_handed(module: nn.Module, seqlen_k: int) -> None:
    """A causal layer whose mask slides but which is not handed its window. transformers builds a sliding layer's
    mask from config.sliding_window (create_sliding_window_causal_mask; with layer_types, for the "sliding_attention"
    layers, else for every layer), and most attention modules pass the window on; PhiMoE's and Qwen2-MoE's (5.25)
    do not, so eager and SDPA slide while fa3nn, handed sliding_window=None and a padding-only mask, attended to
    every key (as transformers' flash_attention_2 does): logits off by about 1 at window 4 over 16 tokens, silently.
    Only refuses, never adds the window: which layers slide is read from the same config fields transformers' model
    code reads, but that code is the model's, not fa3nn's. Layers whose forward mentions sliding_window pass it
    (None there means a full layer), and models that never build sliding masks are left alone."""
    cls = type(module)
    if not may_miss_its_window(cls):
        return
    config, layer_idx = getattr(module, "config", None), getattr(module, "layer_idx", None)
    window = getattr(config, "sliding_window", None)
    if not isinstance(window, int) or isinstance(window, bool) or window <= 0 or seqlen_k <= window:
        return  # (no window, or one that leaves every key of this call in view)
    layer_types = getattr(config, "layer_types", None)
    if layer_types is not None and (layer_idx is None or layer_types[layer_idx] != "sliding_attention"):
        return
    where = "" if layer_idx is None else f" (layer {layer_idx})"
    raise NotImplementedError(
        f"{cls.__name__}{where} gets a sliding window of {window} from the model's mask (config.sliding_window) but "
        f"is not handed it (sliding_window=None): fa3nn would attend to all {seqlen_k} keys; use "
        "attn_implementation='sdpa' or 'eager' for sequences longer than the window")


@class_fact
def may_miss_its_window(cls: type) -> bool:
    """Whether a causal layer of cls may get a sliding mask without being handed its window: its forward does not
    mention sliding_window and its modeling file builds sliding masks (refuse_a_window_not_handed)."""
    return not forward_mentions(cls, "sliding_window") and builds_sliding_masks(cls)


def read_class_facts(layers: list[nn.Module]) -> None:
    """At patch time, what each call asks of its layer's class (class_fact), so that a compiled call finds it as a
    constant. (The forward parameters the PackingWatch hooks look position_ids up by are read by position_id_holders,
    also at patch time.)"""
    for layer in layers:
        may_miss_its_window(type(layer))


@class_fact
def builds_sliding_masks(cls: type) -> bool:
    """Whether the modeling file of an attention class builds sliding-window causal masks."""
    try:
        return "create_sliding_window_causal_mask" in inspect.getsource(sys.modules[cls.__module__])
    except (KeyError, OSError, TypeError):
        return False


class PackingWatch:
    """Forward hooks on a patched model and the modules inside it that take position_ids and hold attention layers
    (position_id_holders) keep the position_ids of the current call for attention layers that are not handed them
    (some decoder layers drop them: Llama 4's, Cohere2's in transformers 4.57): such a causal layer refuses a batch
    those position_ids pack (refuse_unseen_packing) instead of running it unpacked. Without a cache transformers
    finds the packing itself and the mask brings it (the layout), so this is for calls with a cache. The position_ids
    are read by name or position; an inner call without them keeps the outer call's; each call's end restores what
    was there before (after the outermost: nothing), even when it raises. Per thread: two threads calling one model
    see their own calls' position_ids. Only refuses, never uses them: under activation checkpointing a layer's
    recompute runs in the backward."""

    def __init__(self):
        self._local = threading.local()

    # A copy (copy.deepcopy of a patched model, torch.save) starts with no call in flight: threading.local does not
    # pickle.
    def __getstate__(self):
        return {}

    def __setstate__(self, state):
        self._local = threading.local()

    @property
    def position_ids(self):
        return getattr(self._local, "position_ids", None)

    def _outer(self) -> list:
        if not hasattr(self._local, "outer"):
            self._local.outer = []
        return self._local.outer

    def before(self, module, args, kwargs):
        found = forward_argument(module, "position_ids", args, kwargs)
        outer = self._outer()
        outer.append(self.position_ids)
        if found is not None or len(outer) == 1:
            self._local.position_ids = found

    def after(self, module, args, kwargs, output):
        outer = self._outer()
        if outer:
            self._local.position_ids = outer.pop()


def position_id_holders(model: nn.Module, layers: list[nn.Module]) -> list[nn.Module]:
    """The model and the modules inside it that take position_ids and hold attention layers (the base model, a VLM's
    language model: whichever a caller may call directly; decoder layers too, which read them by position or drop
    them), the layers themselves excepted."""
    attention = {id(layer) for layer in layers}
    return [m for m in model.modules() if id(m) not in attention and "position_ids" in forward_parameters(type(m))
            and any(id(sub) in attention for sub in m.modules())]


def forward_argument(module: nn.Module, name: str, args: tuple, kwargs: dict):
    """A forward argument by name, given by keyword or by position."""
    if name in kwargs:
        return kwargs[name]
    names = forward_parameters(type(module))
    return args[names.index(name)] if name in names and names.index(name) < len(args) else None


@class_fact
def forward_parameters(cls: type) -> tuple[str, ...]:
    try:
        return tuple(inspect.signature(cls.forward).parameters)[1:]  # without self
    except (TypeError, ValueError):
        return ()


def refuse_unseen_packing(module: nn.Module, watch: PackingWatch | None, q, k, v) -> None:
    """A layer handed no boundaries, in a model called with position_ids that pack sequences (`watch`, the layer's
    PackingWatch, None for a layer no patch_hf call reached)."""
    if watch is None or watch.position_ids is None or not getattr(module, "is_causal", True):
        return  # (a vision tower's or an encoder's layers: the text's position_ids are not theirs)
    if watch.position_ids.shape[-1] == q.shape[1] and pack_by_position_ids(q, k, v, watch.position_ids) is not None:
        raise NotImplementedError(
            f"{type(module).__name__} is not handed position_ids by its decoder layer, but the model was called with "
            "position_ids that pack several sequences per row: attention cannot see the packing. Pass "
            "cu_seq_lens_q / cu_seq_lens_k / max_length_q / max_length_k (DataCollatorWithFlattening("
            "return_flash_attn_kwargs=True)) or an attention_mask instead")
