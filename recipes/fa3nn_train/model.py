"""The model: transformers' LlamaForCausalLM from a ModelConfig, randomly initialized, with fa3nn attention swapped
in by `fa3nn.patch_hf` (or transformers' own "sdpa"/"eager" for baselines in the same script)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import fa3nn
from fa3nn.fp8 import from_recipe_name
from fa3nn.metrics import model_flops_per_token


def build_model(model_config, vocab_size: int, seq_len: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    hf_config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=model_config.hidden_size,
        intermediate_size=model_config.intermediate_size,
        num_hidden_layers=model_config.num_layers,
        num_attention_heads=model_config.num_heads,
        num_key_value_heads=model_config.num_kv_heads,
        max_position_embeddings=seq_len,
        rope_theta=model_config.rope_theta,
        initializer_range=model_config.init_std,
        tie_word_embeddings=model_config.tie_embeddings,
        attention_dropout=0.0,
        use_cache=False,
        attn_implementation="eager" if model_config.attention == "fa3nn" else model_config.attention,
    )
    model = LlamaForCausalLM(hf_config)  # transformers' init: normal(0, init_std) weights, ones in norms
    if model_config.attention == "fa3nn":
        fp8 = None if model_config.fp8_attention is None else from_recipe_name(model_config.fp8_attention)
        fa3nn.patch_hf(model, backend=model_config.backend, fp8=fp8)
    if model_config.activation_checkpointing:
        options = {"use_reentrant": False}
        if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.x; the old name is deprecated
            model.activation_checkpointing_enable(activation_checkpointing_kwargs=options)
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=options)
    return model


def flops_per_token(model, model_config, seq_len: int) -> float:
    """Training FLOPs per token (fa3nn.metrics.model_flops_per_token); the input embedding is a lookup, not a
    matmul, so its parameters are left out of N (a tied output head is counted once, as the matmul it is)."""
    n_params = sum(p.numel() for p in model.parameters())
    if not model_config.tie_embeddings:
        n_params -= model.get_input_embeddings().weight.numel()
    return model_flops_per_token(
        n_params, model_config.num_layers, model_config.num_heads,
        model_config.hidden_size // model_config.num_heads, seq_len, causal=True,
    )


def loss_sum(model, batch) -> tuple[torch.Tensor, int]:
    """Summed next-token cross-entropy over the batch's targets (fp32 logits), and how many targets counted.
    Summing (not averaging) lets the trainer divide by the global target count, so gradient accumulation and any
    number of processes give the same loss as one big batch."""
    logits = model(input_ids=batch.input_ids, position_ids=batch.position_ids).logits
    loss = F.cross_entropy(logits.float().flatten(0, 1), batch.targets.flatten(), ignore_index=-100, reduction="sum")
    return loss, int((batch.targets != -100).sum())
