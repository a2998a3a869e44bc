"""fa3nn vs PyTorch SDPA (cuDNN by default) on the same pretraining run, in one invocation: same config, seed, data
and steps; only `model.attention` changes. Writes a JSON with both histories and a summary, and prints a table.

    accelerate launch --config_file configs/accelerate/1gpu.yaml recipes/compare_attention.py --config llama-125m \
        --out benchmarks/results/pretrain-llama-125m-1xh200-s2048.json data.seq_len=2048

Both runs use plain causal blocks (data.keep_boundaries=false) unless told otherwise: SDPA's fused kernels take
`is_causal` but fall back to slower paths for the per-document masks that packed boundaries need, which would make
the baseline look worse than it is.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from fa3nn_train.config import ConfigError, load_config  # noqa: E402
from pretrain import main as pretrain  # noqa: E402

from fa3nn.fp8 import RECIPE_NAMES  # noqa: E402

SDPA_BACKENDS = {"cudnn": "CUDNN_ATTENTION", "flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION"}


def _sdpa_context(name: str):
    if name == "any" or not torch.cuda.is_available():
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([getattr(SDPBackend, SDPA_BACKENDS[name])])


def summarize(history: list[dict]) -> dict:
    timed = [m for m in history if "tokens_per_s" in m]
    timed = timed[1:] or timed  # the first timed window still holds compilation and allocator growth

    def median(key):
        return statistics.median(m[key] for m in timed) if timed and timed[0].get(key) is not None else None

    return {
        "tokens_per_s": median("tokens_per_s"), "tokens_per_s_per_device": median("tokens_per_s_per_device"),
        "tflops_per_device": median("tflops_per_device"), "mfu": median("mfu"),
        "peak_mem_gib": max(m["peak_mem_gib"] for m in history), "final_loss": history[-1]["loss"],
    }


def plan_runs(args) -> dict[str, list[str]]:
    """Each run's label and pretrain overrides, every run's config checked before the first one starts: a value
    only a later run refuses (model.fp8_attention with the SDPA run) surfaced after a whole training run."""
    attention = {"fa3nn": ["model.attention=fa3nn"]}
    if args.fp8:
        attention["fa3nn-fp8"] = ["model.attention=fa3nn", f"model.fp8_attention={args.fp8}"]
    attention["sdpa"] = ["model.attention=sdpa"]
    boundaries = f"data.keep_boundaries={str(args.keep_boundaries).lower()}"
    runs = {label: [*args.overrides, *overrides, boundaries] for label, overrides in attention.items()}
    for overrides in runs.values():
        load_config(args.config, overrides)
    return runs


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="tiny")
    parser.add_argument("--out", help="JSON file for both histories and the summary")
    parser.add_argument("--run-root", default="runs/compare")
    parser.add_argument("--sdpa-backend", default="cudnn", choices=[*SDPA_BACKENDS, "any"])
    parser.add_argument("--keep-boundaries", action="store_true", help="packed documents masked apart in both")
    parser.add_argument("--fp8", choices=RECIPE_NAMES, help="also run fa3nn with this FP8 attention recipe, "
                        "between the fa3nn and SDPA runs")
    parser.add_argument("overrides", nargs="*", metavar="section.field=value")
    args = parser.parse_args(argv)
    try:
        runs = plan_runs(args)
    except ConfigError as error:
        parser.error(str(error))

    results = {}
    for label, overrides in runs.items():
        run_dir = Path(args.run_root) / f"{args.config}-{label}"
        context = _sdpa_context(args.sdpa_backend) if label == "sdpa" else contextlib.nullcontext()
        with context:
            # All runs share one process group: end_training() would destroy it, and neither accelerate's state
            # (2 H200s: "Default process group has not been initialized") nor a re-initialization under torchrun
            # (gloo: a rank hung in init_process_group) survives that.
            history = pretrain(["--config", args.config, "--run-dir", str(run_dir), *overrides],
                               keep_process_group=label != "sdpa")
        results[label] = {"summary": summarize(history), "history": history}
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()

    sdpa_losses = [m["loss"] for m in results["sdpa"]["history"]]

    def gap(label: str) -> float:
        return max(abs(a - b) for a, b in zip((m["loss"] for m in results[label]["history"]), sdpa_losses))

    report = {
        "config": args.config, "overrides": args.overrides, "sdpa_backend": args.sdpa_backend,
        "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
        "processes": int(os.environ.get("WORLD_SIZE", 1)),
        "max_abs_loss_gap": gap("fa3nn"),
        **({"max_abs_loss_gap_fp8": gap("fa3nn-fp8")} if args.fp8 else {}),
        **results,
    }
    if int(os.environ.get("RANK", 0)) == 0:
        print(f"{'attention':<11}{'tok/s':>12}{'tok/s/dev':>12}{'TFLOP/s/dev':>13}{'MFU':>8}{'mem GiB':>9}{'loss':>8}")
        for attention, result in results.items():
            s = result["summary"]
            mfu = f"{100 * s['mfu']:.1f}%" if s["mfu"] is not None else "n/a"
            print(f"{attention:<11}{s['tokens_per_s'] or 0:>12,.0f}{s['tokens_per_s_per_device'] or 0:>12,.0f}"
                  f"{s['tflops_per_device'] or 0:>13.1f}{mfu:>8}{s['peak_mem_gib']:>9.2f}{s['final_loss']:>8.4f}")
        print(f"largest loss gap to sdpa over {len(sdpa_losses)} logged steps: fa3nn {report['max_abs_loss_gap']:.4f}"
              + (f", fa3nn-fp8 {report['max_abs_loss_gap_fp8']:.4f}" if args.fp8 else ""))
        if args.out:
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(json.dumps(report, indent=1))
    return report


if __name__ == "__main__":
    main()
