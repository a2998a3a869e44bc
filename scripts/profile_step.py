"""Where a training step's time goes, fa3nn vs SDPA: torch.profiler over a few optimizer steps of the recipe's model
(random tokens: data loading is not what this looks at), one table of the top operators per attention
implementation by device time (CPU time without a GPU), the median step time, and a Chrome trace of each.

The pretraining comparison (benchmarks/NOTES.md, issue 6) left ~8 ms per llama-125m step at seqlen 2048 that the
attention kernels' own timings do not explain; this is the tool to find it.

    python scripts/profile_step.py --config llama-125m --out-dir /tmp/prof data.seq_len=2048 run.micro_batch_size=8
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recipes"))

import torch  # noqa: E402
from fa3nn_train.config import load_config  # noqa: E402
from fa3nn_train.model import build_model, loss_sum  # noqa: E402


def random_batch(vocab_size: int, micro: int, seq_len: int, device: torch.device) -> SimpleNamespace:
    tokens = torch.randint(0, vocab_size, (micro, seq_len + 1), device=device)
    positions = torch.arange(seq_len, device=device).expand(micro, -1)
    return SimpleNamespace(input_ids=tokens[:, :-1], position_ids=positions, targets=tokens[:, 1:])


def profile(config, attention: str, steps: int, warmup: int, out_dir: Path) -> dict:
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    config.model.attention = attention
    seq_len, micro = config.data.seq_len, config.run.micro_batch_size
    torch.manual_seed(0)
    model = build_model(config.model, config.data.vocab_size, seq_len).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    batch = random_batch(config.data.vocab_size, micro, seq_len, device)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda)

    def step() -> float:
        start = time.perf_counter()
        with autocast:
            loss, _ = loss_sum(model, batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize()
        return time.perf_counter() - start

    for _ in range(warmup):
        step()
    activities = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if cuda else [])
    with torch.profiler.profile(activities=activities) as prof:
        times = [step() for _ in range(steps)]
    sort_by = "self_cuda_time_total" if cuda else "self_cpu_time_total"
    table = prof.key_averages().table(sort_by=sort_by, row_limit=25, max_name_column_width=70)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{attention}.txt").write_text(table)
    prof.export_chrome_trace(str(out_dir / f"{attention}-trace.json"))
    return {"attention": attention, "step_ms": 1e3 * statistics.median(times), "table": table}


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="tiny")
    parser.add_argument("--out-dir", type=Path, default=Path("runs/profile"))
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--attentions", nargs="+", default=["fa3nn", "sdpa"])
    parser.add_argument("overrides", nargs="*", metavar="section.field=value")
    args = parser.parse_args(argv)
    results = []
    for attention in args.attentions:
        config = load_config(args.config, args.overrides)
        result = profile(config, attention, args.steps, args.warmup, args.out_dir)
        gc.collect()  # the model and optimizer of this run go before the next one is built
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        print(f"== {attention}: median step {result['step_ms']:.1f} ms\n{result['table']}")
        results.append(result)
    print(" | ".join(f"{r['attention']} {r['step_ms']:.1f} ms/step" for r in results))
    return results


if __name__ == "__main__":
    main()
