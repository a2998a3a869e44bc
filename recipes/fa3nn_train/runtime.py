"""The accelerate side of a run: the Accelerator (precision, FP8 linears, trackers) and the run directory."""

from __future__ import annotations

import importlib.util
import os
import warnings
from pathlib import Path

import torch
from fa3nn_train.config import ConfigError
from fa3nn_train.metrics_logger import configure_wandb


def make_accelerator(config, run_dir: Path):
    from accelerate import Accelerator

    run = config.run
    on_gpu = torch.cuda.is_available()
    precision = run.mixed_precision if run.mixed_precision != "auto" else ("bf16" if on_gpu else "no")
    kwargs_handlers = []
    if run.fp8_linear:
        if not on_gpu:
            raise ConfigError("run.fp8_linear needs a CUDA GPU with FP8 tensor cores (Hopper); set it to false on CPU")
        if importlib.util.find_spec("torchao") is None:
            raise ConfigError("run.fp8_linear uses accelerate's torchao backend: pip install torchao")
        from accelerate.utils import AORecipeKwargs

        precision, kwargs_handlers = "fp8", [AORecipeKwargs()]
    use_wandb = run.wandb and configure_wandb(run_dir)
    accelerator = Accelerator(
        mixed_precision=precision,
        log_with="wandb" if use_wandb else None,
        project_dir=str(run_dir),
        kwargs_handlers=kwargs_handlers,
        cpu=not on_gpu,  # on CPU, several processes (torchrun or accelerate launch) join through gloo
        step_scheduler_with_optimizer=False,  # the schedule advances once per optimizer step, by our own call
    )
    # `accelerate launch --num_processes N --cpu` starts one process unless under mpirun (--mpirun_hostfile); its
    # launcher sets MASTER_ADDR for N > 1 and no WORLD_SIZE, so one process with MASTER_ADDR is that case
    if (os.environ.get("ACCELERATE_USE_CPU", "").lower() == "true" and os.environ.get("MASTER_ADDR")
            and accelerator.num_processes == 1):
        warnings.warn("accelerate launch --cpu started 1 process, not --num_processes (accelerate starts several CPU "
                      "processes only through mpirun, --mpirun_hostfile); training alone with the accumulation "
                      "of them all. For N processes on CPU (gloo): torchrun --standalone --nproc_per_node N "
                      "recipes/pretrain.py", stacklevel=2)
    if os.environ.get("ACCELERATE_USE_FSDP", "").lower() == "true" and accelerator.distributed_type.name != "FSDP":
        warnings.warn(f"FSDP was asked for (ACCELERATE_USE_FSDP) but accelerate runs "
                      f"{accelerator.distributed_type.name}: it has no FSDP on CPU, so every process holds the whole "
                      "model and optimizer (replicated, as DDP) and checkpoints take the non-FSDP path", stacklevel=2)
    return accelerator


def start_trackers(accelerator, config, run_dir: Path, wandb_id: str | None, launch: dict) -> str | None:
    """Starts wandb (when enabled) and returns its run id, so a resumed run continues the same wandb run. The run's
    config is the TrainConfig plus `launch`: what the logged numbers depend on beyond it (process count and
    accumulation for tokens/s per device, parameters and FLOPs per token for MFU, the run_dir actually used)."""
    if not accelerator.log_with:
        return None
    init = {"wandb": {"dir": str(run_dir), "name": run_dir.name, "id": wandb_id, "resume": "allow"}}
    accelerator.init_trackers(config.run.wandb_project, config={**config.to_dict(), "launch": launch},
                              init_kwargs=init)
    if accelerator.is_main_process:
        return accelerator.get_tracker("wandb", unwrap=True).id
    return wandb_id
