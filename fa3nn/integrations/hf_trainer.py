"""fa3nn's once-per-step FP8 hook for transformers' Trainer: a callback that calls fa3nn.sync_amax on the model
before every optimizer step, after the step's last backward (gradient accumulation included), on every rank.

    model = fa3nn.patch_hf(model, fp8="delayed")
    trainer = Trainer(model, args, ..., callbacks=[fa3nn.sync_amax_callback()])

DelayedScaling's forwards only observe their amax; sync_amax folds the step's amaxes into each layer's history and is
the only thing that changes the scales (fa3nn.fp8.state), so a Trainer without it never advances the history (a layer
warns after 1000 training forwards). transformers is imported when the callback is built, not with fa3nn.
"""

from __future__ import annotations

from fa3nn.fp8.state import sync_amax


def sync_amax_callback():
    """A transformers.TrainerCallback instance whose on_pre_optimizer_step calls fa3nn.sync_amax(model); needs
    transformers with on_pre_optimizer_step (4.46 onwards)."""
    from transformers import TrainerCallback

    if not hasattr(TrainerCallback, "on_pre_optimizer_step"):
        import transformers

        raise RuntimeError(
            f"fa3nn.sync_amax_callback needs transformers >= 4.46 (TrainerCallback.on_pre_optimizer_step), this is "
            f"{transformers.__version__}: upgrade it, or call fa3nn.sync_amax(model) yourself after each step's "
            f"last backward"
        )

    class _SyncAmax(TrainerCallback):
        def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
            if model is None:
                raise RuntimeError("fa3nn.sync_amax_callback: the Trainer passed no model to on_pre_optimizer_step")
            sync_amax(model)

    _SyncAmax.__name__ = _SyncAmax.__qualname__ = "SyncAmaxCallback"
    return _SyncAmax()
