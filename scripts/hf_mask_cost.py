"""Where the packed HF step's mask reading spends its time on the GPU: host wall time, each phase isolated between
synchronizations, of fa3nn's mask function (hf_mask_probe.mask_layout through transformers' create_causal_mask), of
the layout's check and boundaries (hf_layout._layout_calls, first layer), and of a whole forward (synchronized), with
the CUDA kernels each phase launches (torch.profiler, one forward). Same model and packed batch as
scripts/hf_varlen_step_ab.py (8 layers, 8 x 2048 real tokens packed into one row by restarting position_ids).

    python scripts/hf_mask_cost.py --json out.json [--forwards 10]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hf_varlen_step_ab import batch, build, packed  # noqa: E402

from fa3nn.integrations import hf, hf_layout  # noqa: E402

# (hf imports mask_layout by name: patched where it is called)
PHASES = {"mask_layout": (hf, "mask_layout"), "layout_calls": (hf_layout, "_layout_calls")}


def timed(samples: dict, name: str, fn):
    def wrapper(*args, **kwargs):
        torch.cuda.synchronize()
        start = time.perf_counter()
        result = fn(*args, **kwargs)
        torch.cuda.synchronize()
        samples[name].append((time.perf_counter() - start) * 1e3)
        return result
    return wrapper


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--forwards", type=int, default=10)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    model = build("fa3nn", 8)
    by_positions, by_cu_seqlens = packed(batch(8, 2048)[0])
    samples = {name: [] for name in (*PHASES, "forward_position_ids", "forward_cu_seqlens")}
    originals = {name: getattr(module, attr) for name, (module, attr) in PHASES.items()}
    for name, (module, attr) in PHASES.items():
        setattr(module, attr, timed(samples, name, originals[name]))
    with torch.no_grad():
        for _ in range(args.forwards):
            for key, inputs in (("forward_position_ids", by_positions), ("forward_cu_seqlens", by_cu_seqlens)):
                timed(samples, key, lambda inputs=inputs: model(**inputs))()
        for name, (module, attr) in PHASES.items():
            setattr(module, attr, originals[name])
        kernels = {}
        for key, inputs in (("forward_position_ids", by_positions), ("forward_cu_seqlens", by_cu_seqlens)):
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                model(**inputs)
                torch.cuda.synchronize()
            kernels[key] = sum(e.count for e in prof.key_averages() if e.device_type.name == "CUDA")
    medians = {name: statistics.median(s[1:]) for name, s in samples.items() if len(s) > 1}
    result = dict(gpu=torch.cuda.get_device_name(), median_ms=medians, samples_ms=samples, cuda_kernels=kernels)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    print("| phase | median ms (synchronized) |")
    print("|---|---|")
    for name, ms in medians.items():
        print(f"| {name} | {ms:.3f} |")
    print(f"CUDA kernels per forward: {kernels}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
