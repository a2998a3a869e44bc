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
from pretrain import main as pretrain  # noqa: E402

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


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="tiny")
    parser.add_argument("--out", help="JSON file for both histories and the summary")
    parser.add_argument("--run-root", default="runs/compare")
    parser.add_argument("--sdpa-backend", default="cudnn", choices=[*SDPA_BACKENDS, "any"])
    parser.add_argument("--keep-boundaries", action="store_true", help="packed documents masked apart in both")
    parser.add_argument("overrides", nargs="*", metavar="section.field=value")
    args = parser.parse_args(argv)

    results = {}
    attentions = ("fa3nn", "sdpa")
    for attention in attentions:
        run_dir = Path(args.run_root) / f"{args.config}-{attention}"
        overrides = [*args.overrides, f"model.attention={attention}",
                     f"data.keep_boundaries={str(args.keep_boundaries).lower()}"]
        context = _sdpa_context(args.sdpa_backend) if attention == "sdpa" else contextlib.nullcontext()
        with context:
            # Both runs share one process group: end_training() would destroy it, and neither accelerate's state
            # (2 H200s: "Default process group has not been initialized") nor a re-initialization under torchrun
            # (gloo: a rank hung in init_process_group) survives that.
            history = pretrain(["--config", args.config, "--run-dir", str(run_dir), *overrides],
                               keep_process_group=attention != attentions[-1])
        results[attention] = {"summary": summarize(history), "history": history}
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()

    fa3nn_losses = [m["loss"] for m in results["fa3nn"]["history"]]
    sdpa_losses = [m["loss"] for m in results["sdpa"]["history"]]
    report = {
        "config": args.config, "overrides": args.overrides, "sdpa_backend": args.sdpa_backend,
        "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
        "processes": int(os.environ.get("WORLD_SIZE", 1)),
        "max_abs_loss_gap": max(abs(a - b) for a, b in zip(fa3nn_losses, sdpa_losses)),
        **results,
    }
    if int(os.environ.get("RANK", 0)) == 0:
        print(f"{'attention':<10}{'tok/s':>12}{'tok/s/dev':>12}{'TFLOP/s/dev':>13}{'MFU':>8}{'mem GiB':>9}{'loss':>8}")
        for attention, result in results.items():
            s = result["summary"]
            mfu = f"{100 * s['mfu']:.1f}%" if s["mfu"] is not None else "n/a"
            print(f"{attention:<10}{s['tokens_per_s'] or 0:>12,.0f}{s['tokens_per_s_per_device'] or 0:>12,.0f}"
                  f"{s['tflops_per_device'] or 0:>13.1f}{mfu:>8}{s['peak_mem_gib']:>9.2f}{s['final_loss']:>8.4f}")
        print(f"largest loss gap over {len(fa3nn_losses)} logged steps: {report['max_abs_loss_gap']:.4f}")
        if args.out:
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(json.dumps(report, indent=1))
    return report


if __name__ == "__main__":
    main()
