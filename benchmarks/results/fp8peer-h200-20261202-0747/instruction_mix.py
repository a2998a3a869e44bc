"""Instruction mix per score of our FP8 d128 kernel and cuDNN's, from the ncu SASS pages in this folder (gunzip the
two .sass.csv.gz first, run here): executed warp instructions per opcode, divided by the key loop's warp iterations
and by the scores each thread handles per iteration."""

import collections
import csv

# Warp iterations of the key loop (ours: 64 x 192 scores per warpgroup and block, cuDNN: 64 x 256), read off the
# execution counts of the loop's instructions, and scores per thread and iteration.
ITERATIONS = {"ours": 1.398e6, "cudnn": 1.05e6}
SCORES = {"ours": 96, "cudnn": 128}


def opcode_counts(path: str) -> collections.Counter:
    lines = list(csv.reader(open(path)))
    header = lines[1]  # line 0 names the kernel
    counts = collections.Counter()
    for line in lines[2:]:
        if len(line) < len(header):
            continue
        cell = dict(zip(header, line))
        words = cell["Source"].split()
        if words and words[0].startswith("@"):
            words = words[1:]
        opcode = words[0].split(".")[0] if words else "?"
        counts[opcode] += float(cell["Instructions Executed"].replace(",", "") or 0)
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
