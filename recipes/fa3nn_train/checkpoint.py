"""Atomic, safely loadable checkpoints.

Layout: run_dir/checkpoints/step-00000150/ holds
    model.safetensors     every model tensor, including fa3nn's FP8 attention state (buffers of the attached
                          FlashAttentionV3 modules are part of the model's state_dict)
    optimizer.pt          AdamW state            } torch.save, read back with torch.load(weights_only=True):
    scheduler.pt          LR schedule position   } tensors, numbers and containers only, never pickled code
    rng-rank{r}.pt        each process's torch (CPU and CUDA) and Python RNG states
    trainer.json          step (= data position, see data.py), token count, config, wandb run id
and run_dir/checkpoints/latest names the newest complete one.

Atomicity: everything is written into a temporary sibling folder, fsynced, then renamed into place (a rename is
atomic on POSIX filesystems) and only then is `latest` replaced (write a temp file, fsync, rename). A crash at any
point leaves the previous checkpoint and `latest` as they were; stale temporary folders are removed by the next save.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import warnings
from pathlib import Path

import torch

LATEST = "latest"
TMP_PREFIX = ".tmp-"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomic_text(path: Path, text: str) -> None:
    tmp = path.with_name(f"{TMP_PREFIX}{path.name}.{os.getpid()}")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _bare_model(accelerator, model):
    """The model without DDP and torch.compile wrappers, so checkpoint keys never carry `_orig_mod.` and a compiled
    run and an eager run load each other's checkpoints."""
    model = accelerator.unwrap_model(model)
    return getattr(model, "_orig_mod", model)


def _state_dicts(accelerator, model, optimizer):
    """Full (unsharded) model and optimizer state dicts on the main process."""
    if accelerator.distributed_type.name == "FSDP":  # FSDP2: gather shards with torch.distributed.checkpoint
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        return get_state_dict(model, optimizer, options=options)
    return _bare_model(accelerator, model).state_dict(), optimizer.state_dict()


def rng_state() -> dict:
    state = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(accelerator, run_dir: Path, step: int, model, optimizer, scheduler, trainer_state: dict,
                    keep: int) -> Path:
    """Collective: every process calls it. Returns the final checkpoint folder."""
    from safetensors.torch import save_file

    root = run_dir / "checkpoints"
    final = root / f"step-{step:08d}"
    tmp = root / f"{TMP_PREFIX}step-{step:08d}"
    model_state, optimizer_state = _state_dicts(accelerator, model, optimizer)
    if accelerator.is_main_process:
        root.mkdir(parents=True, exist_ok=True)
        for stale in root.glob(f"{TMP_PREFIX}*"):  # left by a crash during an earlier save
            shutil.rmtree(stale, ignore_errors=True) if stale.is_dir() else stale.unlink(missing_ok=True)
        tmp.mkdir()
    accelerator.wait_for_everyone()
    torch.save(rng_state(), tmp / f"rng-rank{accelerator.process_index}.pt")
    if accelerator.is_main_process:
        tensors = {k: v.detach().contiguous().cpu() for k, v in model_state.items()}
        save_file(tensors, tmp / "model.safetensors", metadata={"format": "pt"})
        torch.save(optimizer_state, tmp / "optimizer.pt")
        torch.save(scheduler.state_dict(), tmp / "scheduler.pt")
        (tmp / "trainer.json").write_text(json.dumps({**trainer_state, "step": step}, indent=1))
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        for file in tmp.iterdir():
            with open(file, "rb") as f:
                os.fsync(f.fileno())
        if final.exists():  # re-saving the same step (e.g. after a resume): replace it as a whole
            shutil.rmtree(final)
        os.replace(tmp, final)
        _fsync_dir(root)
        _write_atomic_text(root / LATEST, final.name)
        # the newest `keep` up to this step; later ones are an earlier, longer run's in this run_dir (a fresh run
        # there): pruning them by name instead deleted the checkpoint just written, the one `latest` names
        older = sorted(p for p in root.glob("step-*") if p.is_dir() and p.name < final.name)
        for old in older[:max(len(older) - (keep - 1), 0)]:  # this step's and the keep - 1 before it stay
            shutil.rmtree(old)
    accelerator.wait_for_everyone()
    return final


def latest_checkpoint(run_dir: Path) -> Path | None:
    pointer = run_dir / "checkpoints" / LATEST
    if not pointer.exists():
        return None
    path = pointer.parent / pointer.read_text().strip()
    if not (path / "trainer.json").exists():
        raise FileNotFoundError(f"{pointer} names {path.name}, which is missing or incomplete")
    return path


def trainer_state(path: Path) -> dict:
    """A checkpoint's trainer.json: step, token count, config (TrainConfig.to_dict()), wandb run id."""
    return json.loads((path / "trainer.json").read_text())


def _keyed_by_name(model, optimizer, optimizer_state: dict) -> dict:
    """The optimizer state of a checkpoint saved without FSDP (torch's optimizer.state_dict(): parameters named by
    their position in param_groups) keyed by parameter name, as set_state_dict wants (it raised KeyError
    'state.0.step' on it); one saved by FSDP (get_state_dict: already by name) is returned as it is. Positions map
    to names through this optimizer's param_groups, whose order build_optimizer fixes whatever the wrapping."""
    groups = optimizer_state["param_groups"]
    positions = [index for group in groups for index in group["params"]]
    if not all(isinstance(index, int) for index in positions):
        return optimizer_state
    name_of = {id(param): name.replace("_orig_mod.", "") for name, param in model.named_parameters()}
    names = [name_of[id(param)] for group in optimizer.param_groups for param in group["params"]]
    if len(names) != len(positions):
        raise ValueError(f"the checkpoint's optimizer holds {len(positions)} parameters, this model's {len(names)}")
    name_at = dict(zip(positions, names))
    return {"state": {name_at[index]: state for index, state in optimizer_state["state"].items()},
            "param_groups": [{**group, "params": [name_at[index] for index in group["params"]]} for group in groups]}


# fa3nn's FP8 attention state in a model's state_dict (FlashAttentionV3.fp8_state: per-tile Hadamard signs, delayed
# scaling's amax history and scales): what model.fp8_attention decides, and may change across a resume.
FP8_STATE_KEY = ".fp8_state."


def fp8_state_as_configured(saved: dict, current: dict) -> tuple[dict, list[str], list[str]]:
    """A checkpoint's model state with fa3nn's FP8 attention state made this run's, for a resume that turned
    model.fp8_attention on, off or to another recipe (bf16 first, FP8 later; a strict load refused it with torch's
    missing / unexpected keys): the checkpoint's FP8 tensors this model does not hold are dropped, and the ones it
    holds that the checkpoint lacks keep this run's fresh values (per-tile signs depend only on the seed and the
    layer; a delayed history starts empty, as in a fresh run). Returns (state, dropped keys, fresh keys); every
    other key is left to the strict load."""
    dropped = sorted(k for k in saved if FP8_STATE_KEY in k and k not in current)
    fresh = sorted(k for k in current if FP8_STATE_KEY in k and k not in saved)
    state = {k: v for k, v in saved.items() if k not in dropped}
    state.update({k: current[k].detach().cpu() for k in fresh})
    return state, dropped, fresh


def load_checkpoint(accelerator, path: Path, model, optimizer, scheduler) -> dict:
    """Restore model, optimizer, scheduler and this process's RNG; returns trainer.json's contents."""
    from safetensors.torch import load_file

    model_state, dropped, fresh = fp8_state_as_configured(load_file(path / "model.safetensors"),
                                                          _bare_model(accelerator, model).state_dict())
    if dropped or fresh:
        accelerator.print(f"resume: model.fp8_attention differs from {path.name}'s run: {len(dropped)} FP8 attention "
                          f"state tensors of the checkpoint not loaded, {len(fresh)} started fresh")
    optimizer_state = torch.load(path / "optimizer.pt", map_location="cpu", weights_only=True)
    if accelerator.distributed_type.name == "FSDP":
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict

        optimizer_state = _keyed_by_name(model, optimizer, optimizer_state)
        set_state_dict(model, optimizer, model_state_dict=model_state, optim_state_dict=optimizer_state,
                       options=StateDictOptions(full_state_dict=True))
    else:
        _bare_model(accelerator, model).load_state_dict(model_state)
        optimizer.load_state_dict(optimizer_state)
    scheduler.load_state_dict(torch.load(path / "scheduler.pt", weights_only=True))
    rng_file = path / f"rng-rank{accelerator.process_index}.pt"
    if rng_file.exists():
        set_rng_state(torch.load(rng_file, weights_only=True))
    else:  # resumed on more processes than saved: the model, optimizer and data position do not depend on the count
        warnings.warn(f"no {rng_file.name} in {path.name} (saved by fewer processes): this process keeps its seeded "
                      "RNG state (the recipe draws no random numbers while training: no dropout, and the data "
                      "shuffles with its own seeded generators)", stacklevel=2)
    return trainer_state(path)
