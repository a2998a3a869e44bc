"""The markdown table of a scripts/gpu_pretrain_matrix.sh run: one row per (model, seqlen, processes, attention)
from the compare_attention JSONs in a folder, with the 1 -> 2 GPU scaling efficiency at the same per-GPU batch
(per-GPU tokens/s on 2 GPUs over the 1-GPU run's) and fa3nn's tokens/s over SDPA's in the same invocation.

    python scripts/pretrain_matrix_table.py benchmarks/results/pretrain-matrix
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

MODES = ("1gpu", "2gpu-ddp", "2gpu-fsdp2")


def load(folder: Path) -> dict[tuple[str, str, str], dict]:
    """Reports by (model, seqlen, mode) from files named MODEL-sSEQLEN-MODE.json (gpu_pretrain_matrix.sh's names)."""
    runs = {}
    for path in sorted(folder.glob("*.json")):
        name = re.fullmatch(rf"(.+)-s(\d+)-({'|'.join(MODES)})", path.stem)
        if name is not None:
            runs[name.groups()] = json.loads(path.read_text())
    return runs


def table(runs: dict[tuple[str, str, str], dict]) -> str:
    lines = [
        "| model | seqlen | mode | attention | tok/s | tok/s/GPU | TFLOP/s/GPU | MFU | peak GiB | final loss | "
        "fa3nn/sdpa | max loss gap | scaling vs 1 GPU |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (model, seq, mode), report in sorted(runs.items(), key=lambda kv: (kv[0][0], int(kv[0][1]), kv[0][2])):
        ratio = report["fa3nn"]["summary"]["tokens_per_s"] / report["sdpa"]["summary"]["tokens_per_s"]
        for attention in ("fa3nn", "sdpa"):
            s = report[attention]["summary"]
            mfu = "n/a" if s["mfu"] is None else f"{100 * s['mfu']:.1f}%"
            one = runs.get((model, seq, "1gpu"))
            scaling = ""
            if one is not None and mode != "1gpu":
                scaling = f"{s['tokens_per_s_per_device'] / one[attention]['summary']['tokens_per_s_per_device']:.2f}"
            lines.append(
                f"| {model} | {seq} | {mode} | {attention} | {s['tokens_per_s']:,.0f} | "
                f"{s['tokens_per_s_per_device']:,.0f} | {s['tflops_per_device']:.1f} | {mfu} | "
                f"{s['peak_mem_gib']:.1f} | {s['final_loss']:.3f} | {ratio:.2f} | "
                f"{report['max_abs_loss_gap']:.3f} | {scaling} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(load(Path(sys.argv[1]))))
