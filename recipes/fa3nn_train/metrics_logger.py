"""One metrics line every `log_every` steps (and at each evaluation, whose eval/loss, eval/perplexity and
eval/tokens it then carries), to three places: stdout (main process), metrics.jsonl in the run directory, and the
accelerate trackers (Weights & Biases, offline when no API key is configured).

tokens/s counts the tokens of every process (global) and per device, over the steps since the last line (or, for
the first line, since the end of the `run.warmup_steps_excluded` warm-up steps: allocator warm-up, compilation).
TFLOP/s and MFU are per device, from `fa3nn.metrics` (model FLOPs per token x tokens/s, over the documented peak of
the device).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path

import torch

from fa3nn.metrics import mfu, peak_tflops


def configure_wandb(run_dir: Path) -> bool:
    """Offline mode unless an API key is configured; returns False when wandb is not installed."""
    try:
        import wandb  # noqa: F401
    except ImportError:
        print("wandb is not installed: logging to metrics.jsonl only (pip install wandb, or run.wandb=false)")
        return False
    has_key = bool(os.environ.get("WANDB_API_KEY")) or (Path.home() / ".netrc").exists() and "api.wandb.ai" in (
        Path.home() / ".netrc").read_text()
    if not has_key:
        os.environ.setdefault("WANDB_MODE", "offline")
    os.environ.setdefault("WANDB_DIR", str(run_dir))
    os.environ.setdefault("WANDB_SILENT", "true")
    return True


def _logged_step(line: str) -> int | None:
    """A metrics.jsonl line's step, None for a line a crash cut short (no newline, or not JSON)."""
    if not line.endswith("\n"):
        return None
    try:
        return json.loads(line)["step"]
    except (json.JSONDecodeError, KeyError, TypeError):
        return None


def drop_steps_after(jsonl: Path, step: int) -> None:
    """Keep only the lines of metrics.jsonl up to `step`: a run resumed from step s after a crash logs s + 1, ...
    again, and a log holding both the crashed run's lines and the resumed run's had each of those steps twice. A line
    the crash cut short goes too."""
    if not jsonl.exists():
        return
    lines = [line for line in jsonl.read_text().splitlines(keepends=True)
             if (logged := _logged_step(line)) is not None and logged <= step]
    tmp = jsonl.with_name(f".{jsonl.name}.tmp{os.getpid()}")
    tmp.write_text("".join(lines))
    os.replace(tmp, jsonl)


def peak_memory_gib(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    # CPU: the process's peak resident set (ru_maxrss is KiB on Linux, bytes on macOS)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (2**30 if sys.platform == "darwin" else 2**20)


class MetricsLogger:
    def __init__(self, accelerator, run_dir: Path, flops_per_token: float, tokens_per_step: int):
        self.accelerator = accelerator
        self.world = accelerator.num_processes
        self.flops_per_token = flops_per_token
        self.tokens_per_step = tokens_per_step  # global
        device = accelerator.device
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)  # peak memory of training, not of what ran before
        self.peak = peak_tflops(torch.cuda.get_device_name(device) if device.type == "cuda" else None)
        self.jsonl = open(run_dir / "metrics.jsonl", "a") if accelerator.is_main_process else None
        self._mark_step, self._mark_time = None, None

    def start_window(self, step: int) -> None:
        """Start timing throughput at `step` (the trainer calls it once the excluded warm-up steps are done, and
        after each checkpoint save)."""
        if self.accelerator.device.type == "cuda":
            torch.cuda.synchronize()
        self._mark_step, self._mark_time = step, time.perf_counter()

    def leave_out(self, step: int) -> None:
        """Restart the window at `step` if timing has started, leaving out of tokens/s what ran since the line just
        measured (an evaluation); during the excluded warm-up steps timing starts later anyway."""
        if self._mark_step is not None:
            self.start_window(step)

    def log(self, step: int, loss: float, lr: float, grad_norm: float, tokens_seen: int) -> dict:
        return self.write(self.measure(step, loss, lr, grad_norm, tokens_seen))

    def measure(self, step: int, loss: float, lr: float, grad_norm: float, tokens_seen: int) -> dict:
        """The line's metrics (throughput over the window that ends now, which starts the next one); `write` logs
        them, after the trainer has added what it measured in between (the evaluation, left out of the window)."""
        if self.accelerator.device.type == "cuda":
            torch.cuda.synchronize()
        now = time.perf_counter()
        metrics = {"step": step, "loss": loss, "lr": lr, "grad_norm": grad_norm, "tokens_seen": tokens_seen}
        if self._mark_step is not None and step > self._mark_step:
            tokens_per_s = (step - self._mark_step) * self.tokens_per_step / (now - self._mark_time)
            per_device = tokens_per_s / self.world
            metrics.update({
                "tokens_per_s": tokens_per_s,
                "tokens_per_s_per_device": per_device,
                "tflops_per_device": per_device * self.flops_per_token / 1e12,
                "mfu": mfu(per_device, self.flops_per_token, self.peak),
            })
        metrics["peak_mem_gib"] = peak_memory_gib(self.accelerator.device)
        if self.world > 1:
            metrics.update(self._across_ranks(metrics["peak_mem_gib"]))
        if self._mark_step is not None:  # the next window starts here (once timing has started at all)
            self._mark_step, self._mark_time = step, now
        return metrics

    def write(self, metrics: dict) -> dict:
        """To the trackers (wandb: eval/loss and eval/perplexity group under "eval") and metrics.jsonl."""
        self.accelerator.log({k: v for k, v in metrics.items() if v is not None and k != "step"}, step=metrics["step"])
        if self.jsonl is not None:
            self.jsonl.write(json.dumps(metrics) + "\n")
            self.jsonl.flush()
        return metrics

    def _across_ranks(self, peak_mem_gib: float) -> dict:
        """Peak memory of every rank (FSDP2 shards unevenly when layer sizes don't divide), gathered at log steps
        only: one small all-gather."""
        local = torch.tensor([peak_mem_gib], dtype=torch.float64, device=self.accelerator.device)
        peaks = self.accelerator.gather(local).tolist()
        return {"peak_mem_gib_max": max(peaks), "peak_mem_gib_min": min(peaks)}

    def close(self) -> None:
        if self.jsonl is not None:
            self.jsonl.close()


def format_line(m: dict) -> str:
    parts = [f"step {m['step']:>6}", f"loss {m['loss']:.4f}", f"lr {m['lr']:.2e}", f"gnorm {m['grad_norm']:.3f}"]
    if "tokens_per_s" in m:
        parts += [f"tok/s {m['tokens_per_s']:,.0f} ({m['tokens_per_s_per_device']:,.0f}/dev)",
                  f"TFLOP/s {m['tflops_per_device']:.3g}/dev"]
        parts.append(f"MFU {100 * m['mfu']:.1f}%" if m.get("mfu") is not None else "MFU n/a")
    parts.append(f"mem {m['peak_mem_gib']:.2f} GiB")
    if "eval/loss" in m:
        parts += [f"eval loss {m['eval/loss']:.4f}", f"eval ppl {m['eval/perplexity']:.1f}"]
    return " | ".join(parts)
