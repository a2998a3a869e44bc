"""Instruction mix per score of our FP8 d128 kernel and cuDNN's, from the ncu SASS pages in this folder (gunzip the
two .sass.csv.gz first, run here): executed warp instructions per opcode, divided by the key loop's warp iterations
and by the scores each thread handles per iteration."""

import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))

from ncu_sass_summary import read_rows  # noqa: E402

# Warp iterations of the key loop (ours: 64 x 192 scores per warpgroup and block, cuDNN: 64 x 256), read off the
# execution counts of the loop's instructions, and scores per thread and iteration.
ITERATIONS = {"ours": 1.398e6, "cudnn": 1.05e6}
SCORES = {"ours": 96, "cudnn": 128}


def opcode_counts(path: str) -> collections.Counter:
    counts = collections.Counter()
    for row in read_rows(path):
        counts[row["opcode"]] += row["executed"]
    return counts


def main() -> None:
    counts = {name: opcode_counts(f"{name}.sass.csv") for name in ITERATIONS}
    per_score = {name: {op: n / ITERATIONS[name] / SCORES[name] for op, n in c.items()} for name, c in counts.items()}
    for name, c in per_score.items():
        print(f"{name}: {sum(c.values()):.2f} warp instructions per score and thread")
    ops = sorted(set(per_score["ours"]) | set(per_score["cudnn"]),
                 key=lambda op: -(per_score["ours"].get(op, 0) + per_score["cudnn"].get(op, 0)))
    for op in ops[:40]:
        print(f"{op:12s} ours {per_score['ours'].get(op, 0):6.3f}  cudnn {per_score['cudnn'].get(op, 0):6.3f}")


if __name__ == "__main__":
    main()
