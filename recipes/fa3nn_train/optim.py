"""AdamW with decoupled weight decay on matrices only, and a linear-warmup + cosine learning-rate schedule."""

from __future__ import annotations

import math

import torch


def build_optimizer(model, optim) -> torch.optim.AdamW:
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]  # norms, biases
    groups = [{"params": decay, "weight_decay": optim.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    # fused=False keeps CPU and GPU runs on the same, deterministic implementation; foreach is the fast default
    return torch.optim.AdamW(groups, lr=optim.lr, betas=(optim.beta1, optim.beta2), eps=optim.eps)


def lr_at(step: int, optim, max_steps: int) -> float:
    """The learning rate for optimizer step `step` (0-based): linear warmup to optim.lr over warmup_steps, then
    cosine decay to optim.min_lr at max_steps."""
    if step < optim.warmup_steps:
        return optim.lr * (step + 1) / optim.warmup_steps
    progress = min(1.0, (step - optim.warmup_steps) / max(1, max_steps - optim.warmup_steps))
    return optim.min_lr + 0.5 * (optim.lr - optim.min_lr) * (1 + math.cos(math.pi * progress))


def build_scheduler(optimizer, optim, max_steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    def factor(step: int) -> float:  # LambdaLR multiplies optim.lr by it; optim.lr = 0 trains at 0 throughout
        return lr_at(step, optim, max_steps) / optim.lr if optim.lr > 0 else 0.0

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
