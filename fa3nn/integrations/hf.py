"""The one-call Hugging Face swap: `fa3nn.patch_hf(model)` routes a transformers model's attention through fa3nn;
`fa3nn.unpatch_hf(model)` undoes it exactly.

How it plugs in (transformers >= 4.53, where masks are built by `masking_utils`):

* an attention function is registered with `AttentionInterface` under `ATTN_IMPLEMENTATION` ("fa3nn"). The name
  holds neither "flash" nor "sdpa": transformers treats such names specially (it would try to fetch a hub kernel, or
  run SDPA's dispatch checks).
* a mask function is registered under the same name with `AttentionMaskInterface`. Without one, masking_utils returns
  no mask at all for an unknown name, and a padded batch would silently attend to its padding. fa3nn masks causal
  and sliding-window patterns itself, so the mask it needs is the 2D padding mask, or None without padding
  (transformers' FlashAttention-2 semantics); where transformers marks the pattern as more than that (packed
  position_ids, chunks, custom overlays), the layout read from its mask function (hf_mask_probe, hf_layout).
* transformers passes q/k/v as (batch, nheads, seqlen, headdim) and expects (batch, seqlen, nheads, headdim) back;
  fa3nn takes the latter, so a transpose view (stride 1 in headdim, no copy) is all the layout work. K/V keep their
  nheads_kv heads: GQA never goes through `repeat_kv`.

Per attention layer, `patch_hf(model)` attaches a `FlashAttentionV3` as `<layer>.fa3nn_attention`: it carries the
layer's backend, determinism and FP8 recipe, and the recipe's per-layer state (Hadamard signs seeded by the
layer's `layer_idx`, or the delayed-scaling amax history), which appears in the model's state_dict under that
name. Causal, window, softcap and scale come from each call's kwargs, i.e. from the model itself (`is_causal`,
`sliding_window`, `softcap`, `scaling`).

patch_hf's options belong to the model it was given: each of its attention layers holds them (`_Options`, a plain
attribute), so two models patched with different options keep them. A layer no patch_hf call reached (a model built
with attn_implementation="fa3nn" by name) reads the one process-wide set, which only `patch_hf()` without a model
sets.

What is refused rather than run (position biases, sparse attention, a sliding window a layer is not handed, packing
it cannot see, dropout), and why: hf_refusals.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from dataclasses import dataclass

import torch
from torch import nn

from fa3nn.checks import check_bool
from fa3nn.dispatch import check_backend_name
from fa3nn.fp8 import as_recipe
from fa3nn.integrations.hf_layout import blocks_agree, pack_by_layout
from fa3nn.integrations.hf_mask_probe import mask_layout, pairs
from fa3nn.integrations.hf_padding import (
    hf_window,
    pack_by_cu_seqlens,
    pack_by_position_ids,
    refuse_holes_under_a_window,
    unpad_by_mask,
    unpad_keys_by_mask,
)
from fa3nn.integrations.hf_refusals import (  # noqa: F401 (UnsupportedModel: raised by patch_hf, imported from here)
    PackingWatch,
    UnsupportedModel,
    forward_mentions,
    position_id_holders,
    read_class_facts,
    refuse_a_window_not_handed,
    refuse_position_biases,
    refuse_sparse_attention,
    refuse_unseen_packing,
    refuse_unsupported_arguments,
    unsupported,
)
from fa3nn.interface import attention
from fa3nn.module import FlashAttentionV3

ATTN_IMPLEMENTATION = "fa3nn"
LAYER_ATTRIBUTE = "fa3nn_attention"
EXPLICIT_BOUNDARIES = ("cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k")  # DataCollatorWithFlattening's
WATCH_ATTRIBUTE = "_fa3nn_packing_watch"  # the model's PackingWatch, a plain attribute of each attention layer
OPTIONS_ATTRIBUTE = "_fa3nn_options"  # the model's _Options, a plain attribute of each attention layer
MIN_TRANSFORMERS = (4, 53)
_PackingWatch = PackingWatch  # its name here before hf_refusals: patched models torch.save'd then load by it


@dataclass(frozen=True)
class _Options:
    """patch_hf's options. A patched model's attention layers each hold its own (OPTIONS_ATTRIBUTE): they were one
    process-wide set, so patching a second model changed the first one's (its ignore_dropout=True then raised on
    dropout, or a model patched to raise trained with dropout silently off)."""

    backend: str = "auto"
    deterministic: bool = False
    ignore_dropout: bool = False


_defaults = _Options()  # layers no patch_hf call reached (models selected by name); set by patch_hf() alone
_registered_by_us = False


def _transformers_version() -> tuple[int, int]:
    import transformers

    major, minor = transformers.__version__.split(".")[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)


def _interfaces():
    version = _transformers_version()
    if version < MIN_TRANSFORMERS:
        raise ImportError(
            f"fa3nn.patch_hf needs transformers >= {'.'.join(map(str, MIN_TRANSFORMERS))} (mask creation through "
            f"masking_utils.AttentionMaskInterface); found {'.'.join(map(str, version))}. "
            "Upgrade with: pip install -U 'transformers>=4.53'"
        )
    from transformers.masking_utils import AttentionMaskInterface
    from transformers.modeling_utils import AttentionInterface

    return AttentionInterface, AttentionMaskInterface


# --------------------------------------------------------------------------------------------------------------------
# The functions transformers calls
# --------------------------------------------------------------------------------------------------------------------


def _check_padding_mask(attention_mask: torch.Tensor) -> None:
    if attention_mask.dim() != 2:
        raise ValueError(
            f"attn_implementation={ATTN_IMPLEMENTATION!r} takes a 2D padding mask (batch, seqlen), got shape "
            f"{tuple(attention_mask.shape)}; for arbitrary 4D masks use attn_implementation='sdpa' or 'eager'"
        )


def fa3nn_padding_mask(
    batch_size: int,
    *,
    kv_length: int,
    attention_mask: torch.Tensor | None = None,
    mask_function=None,
    allow_is_causal_skip: bool = True,
    **kwargs,
) -> torch.Tensor | None:
    """The mask fa3nn needs. Without anything beyond causal / sliding per row: the 2D padding mask (batch,
    kv_length), True on real tokens, or None without padding; fa3nn applies the pattern in `mask_function` itself
    from the layer's kwargs. Where transformers says the pattern is more than that (allow_is_causal_skip=False:
    packed position_ids, chunked layers, custom overlays, every bidirectional mask in 5.x) and queries and keys are
    the same positions: the layout hf_mask_probe reads from `mask_function` (int32 (rows, batch, seqlen): segments,
    bidirectional blocks, recorded pairs; padding included), which the attention packs and checks against the layer.
    With a cache and several queries (a prefill into a fixed-size cache) such a mask cannot be read that way: one
    that lets a query see a later position is refused here. transformers passes everything by keyword; 4.5x sends
    `cache_position`, 5.x `q_length` / `q_offset` / `device`."""
    if _is_layout(attention_mask):
        return attention_mask  # a layout this function made already (4.5x's generation builds masks in advance)
    padding = None
    if attention_mask is not None:
        _check_padding_mask(attention_mask)
        padding = attention_mask[:, -kv_length:].bool()  # sliding-window caches keep only the last keys
    slots = kv_length
    if padding is not None and padding.shape[1] < kv_length and kwargs.get("kv_offset", 0) == 0:
        # a cache allocated ahead (4.57's static caches, a chunked layer's too) with fewer tokens than slots: the
        # mask covers the filled ones, the rest are empty (a Llama 4 prompt shorter than a chunk was refused)
        kv_length = padding.shape[1]
    if mask_function is not None and (padding is None or padding.shape[1] == kv_length):
        filled = _filled_slots(mask_function, batch_size, kv_length, kwargs, padding)
        if filled is not None:  # a static cache's empty slots: the keys end at the last query
            padding = (torch.ones(batch_size, filled, dtype=torch.bool, device=_device(padding, kwargs))
                       if padding is None else padding[:, :filled])
            kv_length = filled
    queries_are_keys = _queries_are_keys(kv_length, padding, kwargs)
    if mask_function is not None and not queries_are_keys and _chunked(kwargs):
        return _chunk_keys(mask_function, batch_size, kv_length, padding, kwargs)
    if not allow_is_causal_skip and mask_function is not None:
        device = _device(padding, kwargs)
        if queries_are_keys:
            return mask_layout(mask_function, batch_size, kv_length, padding, device, _index_based(kwargs))
        _refuse_later_positions(mask_function, batch_size, kv_length, kwargs, device)
    if padding is None or (padding.shape[1] == slots and bool(padding.all())):
        return None  # (a padding mask shorter than the slots is kept: it cuts off the empty ones)
    return padding


def _is_layout(mask) -> bool:
    """fa3nn_padding_mask's layout (hf_mask_probe.mask_layout): int32, (rows, batch, seqlen)."""
    return mask is not None and mask.dtype == torch.int32 and mask.dim() == 3


def _device(padding, kwargs: dict):
    return kwargs.get("device") or (padding if padding is not None else kwargs["cache_position"]).device


def _filled_slots(mask_function, batch_size: int, kv_length: int, kwargs: dict, padding) -> int | None:
    """A causal mask over a cache allocated ahead (static caches: kv_length slots, keys from position 0): how many
    slots hold tokens, i.e. up to the last query; None where every slot may (or the keys do not start at 0, or the
    mask is bidirectional: cross-attention's keys are the encoder's). Without it the empty slots were attended
    (bottom-right alignment put the queries at the cache's end). One host read, only with a cache of more slots than
    queries; under a compiled static-cache decode a graph break per step."""
    q_length = _query_count(kwargs)
    if kwargs.get("kv_offset", 0) != 0 or q_length is None or q_length >= kv_length:
        return None
    q_offset = kwargs.get("q_offset")
    if isinstance(q_offset, int) and q_offset + q_length >= kv_length:
        return None  # 5.x's dynamic caches: every slot holds a token, known without a read
    device = _device(padding, kwargs)
    last = _query_positions(kwargs, device)[-1:]
    ahead = pairs(mask_function, last[None], (last + 1).clamp(max=kv_length - 1)[None], _index_based(kwargs))
    last_position, bidirectional = torch.stack([last[0].long(), ahead[0, 0].long()]).tolist()
    filled = last_position + 1
    return filled if not bidirectional and filled < kv_length else None


def _index_based(kwargs: dict) -> bool:
    """Whether transformers says the mask function broadcasts over index tensors (5.x: use_vmap=False, everything
    but custom or_mask_function / and_mask_function overlays); 4.5x does not say, and its functions are vmapped."""
    return kwargs.get("use_vmap") is False


def _chunked(kwargs: dict) -> bool:
    """Whether transformers is building a chunked layer's mask (Llama 4: local_size is the chunk size)."""
    config, local_size = kwargs.get("config"), kwargs.get("local_size")
    return local_size is not None and getattr(config, "attention_chunk_size", None) == local_size and getattr(
        config, "sliding_window", None) != local_size


def _query_positions(kwargs: dict, device) -> torch.Tensor:
    cache_position = kwargs.get("cache_position")
    if cache_position is not None:  # transformers 4.5x: the queries' positions
        return cache_position.to(device)
    return torch.arange(kwargs.get("q_length") or 0, device=device) + kwargs.get("q_offset", 0)


def _chunk_keys(mask_function, batch_size: int, kv_length: int, padding, kwargs: dict) -> torch.Tensor:
    """A chunked layer's mask with a cache: its chunks begin at absolute positions, which the cached keys (the last
    chunk's worth) no longer show fa3nn. For one query (decoding) the keys it sees, read from `mask_function` at
    their positions, become the padding mask (a suffix of the cache: fa3nn's own chunk then spans it); several
    queries after a cache may straddle a chunk's start, which a key mask cannot say: refused."""
    device = _device(padding, kwargs)
    positions = _query_positions(kwargs, device)
    if positions.numel() != 1:
        raise NotImplementedError(
            "a chunked attention layer (Llama 4) with several queries after cached keys (a second prefill, assisted "
            "decoding): fa3nn reads chunks only for one query at a time with a cache; use attn_implementation='sdpa'")
    keys = torch.arange(kv_length, device=device) + kwargs.get("kv_offset", 0)
    sees = pairs(mask_function, positions.expand(batch_size, kv_length), keys.expand(batch_size, kv_length),
                 _index_based(kwargs))
    return sees if padding is None else sees & padding


def _refuse_later_positions(mask_function, batch_size: int, kv_length: int, kwargs: dict, device) -> None:
    """With a cache, several queries and a custom pattern (Gemma 3's images prefilled into a static cache): some
    queries seeing their next position and others not is a bidirectional block fa3nn would run causal. One host read,
    where several queries meet such a mask."""
    positions = _query_positions(kwargs, device)
    if positions.numel() <= 1:
        return  # decoding: the one query has no later position among the keys
    kv_offset = kwargs.get("kv_offset", 0)
    later = (positions + 1).clamp(max=kv_offset + kv_length - 1).expand(batch_size, -1)
    sees = pairs(mask_function, positions.expand(batch_size, -1), later, _index_based(kwargs))
    exists = later > positions
    some, every = torch.stack([(sees & exists).any(), (sees | ~exists).all()]).tolist()
    if some and not every:  # (every query seeing its next position: a bidirectional mask, e.g. cross-attention)
        raise NotImplementedError(
            "the model's attention mask lets queries see later positions (bidirectional blocks such as Gemma 3's "
            "images) in a call with a cache of fixed size, which fa3nn reads only without a cache; use a dynamic cache "
            "(the default) or attn_implementation='sdpa' for this generation")


def _queries_are_keys(kv_length: int, padding: torch.Tensor | None, kwargs: dict) -> bool:
    """No cache in this mask: as many queries as keys, both from position 0."""
    if padding is not None and padding.shape[1] != kv_length:
        return False
    if _query_count(kwargs) != kv_length or kwargs.get("kv_offset", 0) != 0:
        return False
    # 4.5x (cache_position): as many query positions as keys from kv_offset 0 are positions 0.., no read needed
    return kwargs.get("cache_position") is not None or kwargs.get("q_offset", 0) == 0


def _query_count(kwargs: dict) -> int | None:
    """The mask's number of queries: 4.5x sends cache_position, 5.x q_length."""
    cache_position = kwargs.get("cache_position")
    return kwargs.get("q_length") if cache_position is None else cache_position.shape[0]


def _attention_chunk(module: nn.Module) -> int:
    """Llama 4's chunked layers (config.layer_types[i] == "chunked_attention"): a query sees the keys of its own
    chunk of attention_chunk_size positions (fa3nn.chunks), counted from its sequence's first token, as
    transformers' chunked mask counts them from the first unpadded one."""
    config, layer_idx = getattr(module, "config", None), getattr(module, "layer_idx", None)
    layer_types = getattr(config, "layer_types", None)
    if not getattr(config, "attention_chunk_size", None) or layer_types is None or layer_idx is None:
        return 0
    return int(config.attention_chunk_size) if layer_types[layer_idx] == "chunked_attention" else 0


def _compute_dtype(query, key, value) -> torch.dtype:
    """One dtype for q, k and v. Under autocast, rotary embeddings (computed in float32) promote q and k to float32
    while v stays in the autocast dtype; as transformers' flash path does, attention then runs in the autocast
    dtype. Outside autocast, mixed inputs run in the widest of them."""
    device_type = query.device.type
    if torch.is_autocast_enabled(device_type):
        return torch.get_autocast_dtype(device_type)
    return functools.reduce(torch.promote_types, (query.dtype, key.dtype, value.dtype))


def fa3nn_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    sliding_window: int | None = None,
    softcap: float | None = None,
    is_causal: bool | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """transformers' attention-function contract: q (batch, nheads, seqlen_q, headdim), k/v (batch, nheads_kv,
    seqlen_k, headdim[_v]) in; (out (batch, seqlen_q, nheads, headdim_v), None) back."""
    layer = getattr(module, LAYER_ATTRIBUTE, None)
    patch_options = getattr(module, OPTIONS_ATTRIBUTE, _defaults)  # its model's, or the by-name ones
    refuse_unsupported_arguments(module, dropout, patch_options.ignore_dropout, kwargs)
    if attention_mask is not None and layer is None:
        _refuse_query_slicing_by_name(module)
    sinks = kwargs.get("s_aux")  # gpt-oss's per-head sink logits (fa3nn.sinks)
    attention_chunk = _attention_chunk(module)
    if kwargs.get("output_attentions"):
        warnings.warn("fa3nn does not return attention weights (output_attentions=True gives None)", stacklevel=2)

    is_causal = getattr(module, "is_causal", True) if is_causal is None else bool(is_causal)
    dtype = _compute_dtype(query, key, value)
    q, k, v = (t.transpose(1, 2).to(dtype) for t in (query, key, value))
    if _is_layout(attention_mask) and k.shape[1] > attention_mask.shape[2]:  # a static cache's empty slots
        k, v = k[:, :attention_mask.shape[2]], v[:, :attention_mask.shape[2]]
    if sliding_window is None and is_causal:
        refuse_a_window_not_handed(module, k.shape[1])
    packed, blocks, is_causal = _boundaries_of_call(module, q, k, v, attention_mask, is_causal, sliding_window,
                                                    attention_chunk, kwargs)
    if blocks is not None and sinks is not None:  # (chunks: refused by pack_by_layout)
        raise NotImplementedError(f"{type(module).__name__}: bidirectional blocks in the mask together with "
                                  "attention sinks; use attn_implementation='eager'")
    options = dict(
        softmax_scale=scaling, causal=is_causal, window_size=hf_window(is_causal, sliding_window, k.shape[1]),
        softcap=float(softcap or 0.0), attention_chunk=attention_chunk,
    )
    if layer is not None:  # the layer's backend, determinism, FP8 recipe and state
        attend = functools.partial(layer.attend, **options)
    else:
        attend = functools.partial(
            attention, **options, deterministic=patch_options.deterministic, backend=patch_options.backend
        )

    if packed is None:
        out, _ = attend(q, k, v, sinks=sinks)
    else:
        out, _ = attend(packed.q, packed.k, packed.v, packed.cu_seqlens_q, packed.cu_seqlens_k, packed.max_seqlen_q,
                        packed.max_seqlen_k, sinks=sinks)
    out = out if packed is None else packed.restore(out)
    if blocks is not None:  # their rows again, non-causal over each block's keys (fa3nn.integrations.hf_layout)
        out = blocks.replace(out, blocks.attend(attend, q, k, v, options["window_size"][0]))
    return out, None


def _boundaries_of_call(module, q, k, v, attention_mask, is_causal: bool, sliding_window, attention_chunk: int,
                        kwargs: dict):
    """(Packed or None for a dense call, hf_layout.Blocks or None, whether the call is causal) from the boundary
    descriptions transformers hands attention (hf_padding's module docstring, in its order)."""
    explicit = all(kwargs.get(n) is not None for n in EXPLICIT_BOUNDARIES)
    if _is_layout(attention_mask):
        # The caller's cu_seq_lens win over our mask's layout (4.57 reads one sequence per row from position ids it
        # made up itself when none were given), unless the layout holds bidirectional blocks: then it must agree.
        if not explicit or blocks_agree(attention_mask, kwargs["cu_seq_lens_q"]):
            return pack_by_layout(q, k, v, attention_mask, is_causal, sliding_window, attention_chunk)
        attention_mask = None
    if attention_mask is not None:
        _check_padding_mask(attention_mask)  # a 4D mask a caller built itself reaches here as it is
        if not is_causal and hf_window(False, sliding_window, k.shape[1]) == (-1, -1):
            # every query sees all its row's real keys: the mask is over the keys (cross-attention: the decoder's
            # queries are not the encoder's positions, even at equal lengths)
            return unpad_keys_by_mask(q, k, v, attention_mask), None, is_causal
        if attention_chunk or hf_window(is_causal, sliding_window, k.shape[1]) != (-1, -1):
            refuse_holes_under_a_window(attention_mask)
        return unpad_by_mask(q, k, v, attention_mask), None, is_causal
    if explicit:
        packed = pack_by_cu_seqlens(
            q, k, v, kwargs["cu_seq_lens_q"], kwargs["cu_seq_lens_k"], kwargs["max_length_q"], kwargs["max_length_k"]
        )
        return packed, None, is_causal
    if kwargs.get("position_ids") is not None:
        return pack_by_position_ids(q, k, v, kwargs["position_ids"]), None, is_causal
    refuse_unseen_packing(module, getattr(module, WATCH_ATTRIBUTE, None), q, k, v)
    return None, None, is_causal


# --------------------------------------------------------------------------------------------------------------------
# patch / unpatch
# --------------------------------------------------------------------------------------------------------------------


def _attention_layers(model: nn.Module) -> list[nn.Module]:
    """The modules that call the AttentionInterface: an `*Attention` class with a `config` and a `scaling`, or whose
    forward looks the interface up (CLIP's, SigLIP's and ModernBERT's keep their scale under other names)."""
    return [
        m for m in model.modules()
        if type(m).__name__.endswith("Attention") and hasattr(m, "config")
        and (hasattr(m, "scaling") or _looks_up_interface(type(m)))
    ]


def _looks_up_interface(cls: type) -> bool:
    return forward_mentions(cls, "ALL_ATTENTION_FUNCTIONS")


def _check_model(model: nn.Module) -> list[nn.Module]:
    from transformers import PreTrainedModel

    if not isinstance(model, PreTrainedModel):
        raise unsupported(model, "it is not a transformers PreTrainedModel")
    can_set = getattr(type(model), "_can_set_attn_implementation", None)
    if can_set is not None and not can_set():
        raise unsupported(model, "its modeling code does not go through the AttentionInterface")
    layers = _attention_layers(model)
    if not layers:
        raise unsupported(model, "no attention layer of the AttentionInterface kind was found")
    refuse_position_biases(model, layers, _configs(model))
    refuse_sparse_attention(model, layers)
    return layers


def _configs(model: nn.Module) -> list:
    """Every config whose `_attn_implementation` the swap may change (the model's, sub-models', sub-configs')."""
    seen, configs = set(), []

    def add(config):
        if config is not None and id(config) not in seen:
            seen.add(id(config))
            configs.append(config)
            for key in getattr(config, "sub_configs", {}) or {}:
                add(getattr(config, key, None))

    for module in model.modules():
        add(getattr(module, "config", None))
    return configs


def _register() -> None:
    global _registered_by_us
    attention_interface, mask_interface = _interfaces()
    attention_interface.register(ATTN_IMPLEMENTATION, fa3nn_attention_forward)
    mask_interface.register(ATTN_IMPLEMENTATION, fa3nn_padding_mask)
    _registered_by_us = True


def _refuse_patched_through_another(model: nn.Module, layers: list[nn.Module]) -> None:
    """A model whose attention layers a patch of a model around it reached (patch_hf(m); patch_hf(m.model)): the
    inner patch recorded "fa3nn" as the previous implementation of the config both share, so unpatch_hf(m) left
    m.model's hooks and unpatch_hf(m.model) set the config back to "fa3nn". Layers patched through the model itself
    or a sub-model (re-patching, patching around a patched sub-model) are fine: those patches are undone first."""
    own = {id(layer) for m in model.modules() if hasattr(m, "_fa3nn_previous") for layer in _attention_layers(m)}
    if any(LAYER_ATTRIBUTE in layer._modules and id(layer) not in own for layer in layers):
        raise ValueError(
            f"{type(model).__name__} is already patched through a model that contains it (fa3nn.patch_hf of that "
            "model switched its attention too). To change options, call fa3nn.patch_hf on that model again; to "
            "patch this one alone, call fa3nn.unpatch_hf on that model first"
        )


def patch_hf(
    model: nn.Module | None = None,
    *,
    fp8=None,
    backend: str = "auto",
    deterministic: bool = False,
    ignore_dropout: bool = False,
):
    """Route a transformers model's attention through fa3nn. Returns the model (patched in place).

    Without a model, only registers `attn_implementation="fa3nn"` so that `from_pretrained(...,
    attn_implementation="fa3nn")` / `from_config` can use it, and sets the backend, determinism and ignore_dropout
    of every model selected that way by name (one process-wide set, the last such call's). With a model, also
    switches it (and its sub-models) to "fa3nn" and attaches one `FlashAttentionV3(fp8=fp8, backend=backend,
    deterministic=deterministic, layer_idx=<the layer's layer_idx>)` per attention layer (with DelayedScaling, call
    fa3nn.sync_amax(model) once per optimizer step); the options are that model's alone. `ignore_dropout=True`
    trains with attention dropout silently off instead of raising. A model patched through one that contains it is
    refused: patch or unpatch the enclosing model.
    """
    global _defaults
    # every option checked before anything is registered or stored (a bad backend once stayed registered)
    check_backend_name(backend)
    check_bool("deterministic", deterministic)
    check_bool("ignore_dropout", ignore_dropout)
    if as_recipe(fp8) is not None and model is None:
        raise ValueError("patch_hf(fp8=...) attaches one FP8 layer per attention module, so it needs the model: "
                         "patch_hf(model, fp8=...); without a model it only registers attn_implementation='fa3nn'")
    _register()
    options = _Options(backend, deterministic, ignore_dropout)
    if model is None:
        _defaults = options
        return None
    layers = _check_model(model)
    _refuse_patched_through_another(model, layers)
    slicers = _query_slicers(model)  # (may refuse: before anything changes)
    # re-patching (e.g. new options) starts from the original state, and so does patching a model with a patched
    # sub-model inside (patch_hf(m.model); patch_hf(m)): the outer patch replaces the inner one, so that
    # unpatch_hf(m) restores both (the inner one's hooks and config stayed before)
    for patched in [m for m in model.modules() if hasattr(m, "_fa3nn_previous")]:
        unpatch_hf(patched)
    previous = {id(c): (c, c._attn_implementation_internal) for c in _configs(model)}
    _switch_configs(model, previous)
    watch = PackingWatch()
    for position, layer in enumerate(layers):
        device = next((p.device for p in layer.parameters()), None)
        layer_idx = getattr(layer, "layer_idx", None)
        if not isinstance(layer_idx, int) or isinstance(layer_idx, bool) or layer_idx < 0:
            layer_idx = position  # none, or a shared block's -1 (Zamba2's attention serves several hybrid layers)
        attention = FlashAttentionV3(causal=True, deterministic=deterministic, fp8=fp8, backend=backend,
                                     layer_idx=layer_idx)
        layer.add_module(LAYER_ATTRIBUTE, attention.to(device) if device is not None else attention)
        setattr(layer, WATCH_ATTRIBUTE, watch)
        setattr(layer, OPTIONS_ATTRIBUTE, options)
    read_class_facts(layers)
    for module in slicers:
        module.__dict__[QUERY_SLICER] = _keep_every_query_row
    watched = position_id_holders(model, layers)
    model._fa3nn_watch_hooks = [hook for m in watched for hook in (
        m.register_forward_pre_hook(watch.before, with_kwargs=True),
        m.register_forward_hook(watch.after, with_kwargs=True, always_call=True))]
    model._fa3nn_previous = previous
    return model


# Gemma 4's text model (transformers 5.x) runs its KV-shared layers on the last logits_to_keep query rows only and
# slices the 4D masks to match, except under flash or flex attention, whose masks it cannot slice: nor fa3nn's (a
# padding mask or the layout; patched, a left-padded or packed call died there: IndexError, found by a probe in s58).
# A patched model keeps every row there, as transformers does under flash attention: the kept rows' logits are the
# same, the others are computed too.
QUERY_SLICER = "_maybe_slice_kv_shared_inputs"
_QUERY_SLICER_PARAMETERS = ("self", "hidden_states", "per_layer_inputs", "position_embeddings", "causal_mask_mapping")


def _query_slicers(model: nn.Module) -> list[nn.Module]:
    """The modules whose class has QUERY_SLICER with the parameters _keep_every_query_row stands in for."""
    found = []
    for module in model.modules():
        method = getattr(type(module), QUERY_SLICER, None)
        if callable(method):
            names = tuple(inspect.signature(method).parameters)[:len(_QUERY_SLICER_PARAMETERS)]
            if names != _QUERY_SLICER_PARAMETERS:
                raise unsupported(model, f"its {type(module).__name__}.{QUERY_SLICER} takes {names}, not the "
                                  f"{_QUERY_SLICER_PARAMETERS} fa3nn knows how to keep every query row for")
            found.append(module)
    return found


def _refuse_query_slicing_by_name(module: nn.Module) -> None:
    """A model selected by name (no patch_hf(model): no per-instance QUERY_SLICER) with KV-shared layers would slice
    fa3nn's mask in its own code before them (IndexError): refused at its first masked attention call instead."""
    if (getattr(getattr(module, "config", None), "num_kv_shared_layers", 0) or 0) > 0:
        raise NotImplementedError(
            f"{type(module).__name__}: this model's KV-shared layers slice the attention masks before them, which "
            "fa3nn's masks do not allow when the model selects attn_implementation='fa3nn' by name; call "
            "fa3nn.patch_hf(model) on the model (it keeps every query row there), or pass no padding mask")


def _keep_every_query_row(hidden_states, per_layer_inputs, position_embeddings, causal_mask_mapping, *unused,
                          **unused_kwargs):
    return hidden_states, per_layer_inputs, position_embeddings, causal_mask_mapping


def _switch_configs(model: nn.Module, previous: dict) -> None:
    """Every config of `previous` to "fa3nn", or none of them (an UnsupportedModel, the configs restored).

    With transformers' set_attn_implementation, a config it leaves as it was counts by who holds it: a sub-model's
    (a PreTrainedModel inside this one) was skipped on purpose, because that sub-model's code does not go through the
    AttentionInterface (the setter warns): forcing its config would send its own mask creation to fa3nn's padding-only
    mask function while its eager attention runs, i.e. no causal mask at all (a ViT + TrOCR VisionEncoderDecoderModel:
    the first token's logits moved when the last token changed). A config no sub-model holds is a copy kept for
    another use (transformers 4.57's Gemma-3 builds its local RoPE from a deep copy of its config), set directly, as
    every config is for releases without the setter (they read the attribute on every call)."""
    from transformers import PreTrainedModel

    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(ATTN_IMPLEMENTATION)
        held = {id(m.config): type(m).__name__ for m in model.modules()
                if isinstance(m, PreTrainedModel) and getattr(m, "config", None) is not None}
        kept = [(held[id(c)], c._attn_implementation) for c, _ in previous.values()
                if c._attn_implementation != ATTN_IMPLEMENTATION and id(c) in held]
        if kept:
            _restore_configs(previous)
            owner, implementation = kept[0]
            raise unsupported(model, f"its sub-model {owner} kept attn_implementation={implementation!r} "
                                      "(transformers does not switch a sub-model whose attention bypasses the "
                                      "AttentionInterface)")
    for config, _ in previous.values():  # what the setter left (copies no sub-model holds), or all without a setter
        if config._attn_implementation != ATTN_IMPLEMENTATION:
            config._attn_implementation = ATTN_IMPLEMENTATION


def _restore_configs(previous: dict) -> None:
    """Every config back to the attention implementation `previous` recorded for it."""
    for config, implementation in previous.values():
        config._attn_implementation_internal = implementation


def unpatch_hf(model: nn.Module | None = None):
    """Undo `patch_hf(model)`: every config gets back the attention implementation it had, and the attached
    FlashAttentionV3 modules are removed, so outputs and state_dict are bit-identical to before the patch.
    Without a model, removes the "fa3nn" registration from transformers (models still set to it then fail)."""
    global _registered_by_us
    if model is None:
        if _registered_by_us:
            attention_interface, mask_interface = _interfaces()
            attention_interface._global_mapping.pop(ATTN_IMPLEMENTATION, None)
            mask_interface._global_mapping.pop(ATTN_IMPLEMENTATION, None)
            _registered_by_us = False
        return None
    previous = getattr(model, "_fa3nn_previous", None)
    if previous is None:
        through = isinstance(model, nn.Module) and any(LAYER_ATTRIBUTE in layer._modules
                                                       for layer in _attention_layers(model))
        raise ValueError(f"{type(model).__name__} was not patched by fa3nn.patch_hf; " + (
            "it is patched through a model that contains it: call fa3nn.unpatch_hf on that one" if through
            else "nothing to undo"))
    _restore_configs(previous)
    for layer in _attention_layers(model):
        if LAYER_ATTRIBUTE in layer._modules:
            del layer._modules[LAYER_ATTRIBUTE]
        layer.__dict__.pop(WATCH_ATTRIBUTE, None)
        layer.__dict__.pop(OPTIONS_ATTRIBUTE, None)
    for module in _query_slicers(model):
        module.__dict__.pop(QUERY_SLICER, None)
    for hook in model._fa3nn_watch_hooks:
        hook.remove()
    del model._fa3nn_previous, model._fa3nn_watch_hooks
    return model
