"""AdamW with decoupled weight decay on matrices only, and a linear-warmup + cosine learning-rate schedule."""

from __future__ import annotations

import math

import torch


def _group_settings(optim) -> list[dict]:
    """AdamW's settings for each param group: matrices, then norms and biases (never decayed)."""
    common = {"betas": (optim.beta1, optim.beta2), "eps": optim.eps}
    return [{**common, "weight_decay": optim.weight_decay}, {**common, "weight_decay": 0.0}]


def build_optimizer(model, optim) -> torch.optim.AdamW:
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]  # norms, biases
    groups = [{"params": params, **settings} for params, settings in zip((decay, no_decay), _group_settings(optim))]
    # fused=False keeps CPU and GPU runs on the same, deterministic implementation; foreach is the fast default
    return torch.optim.AdamW(groups, lr=optim.lr)


def apply_config_after_resume(optimizer, scheduler, optim) -> None:
    """Make a resumed run train with the config it was given. A checkpoint's optimizer and scheduler states carry the
    settings they were saved with (AdamW's load_state_dict restores each group's lr, weight_decay, betas and eps;
    LambdaLR's its base_lrs), so a resume with another optim.lr, weight_decay, beta2 or run.max_steps trained with
    the old ones, or a mix. The moments and the step count stay the checkpoint's. With an unchanged config every
    value is the one loaded, bit for bit: LambdaLR's own base_lr * factor(last_epoch)."""
    for group, settings in zip(optimizer.param_groups, _group_settings(optim)):
        group.update(settings, initial_lr=optim.lr)
    scheduler.base_lrs = [optim.lr] * len(optimizer.param_groups)
    lrs = [base * factor(scheduler.last_epoch) for base, factor in zip(scheduler.base_lrs, scheduler.lr_lambdas)]
    for group, lr in zip(optimizer.param_groups, lrs):
        group["lr"] = lr
    scheduler._last_lr = lrs  # what get_last_lr() returns, read for the first resumed step's log line


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
