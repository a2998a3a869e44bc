"""Summarize an Nsight Compute SASS source page (`ncu -i REP --page source --csv --print-source sass`, as
scripts/gpu_profile.sh writes it): instructions executed per opcode, warp-stall samples per reason and per opcode,
the most stalled instructions, and (--sites) every instruction of some opcodes executed more than a threshold.

    python scripts/ncu_sass_summary.py fp8_d128.sass.csv                      # mix, stalls, top 25 stalled
    python scripts/ncu_sass_summary.py fp8_d128.sass.csv --sites BRA,SYNCS,YIELD --min-count 1e6
"""

from __future__ import annotations

import argparse
import collections
import csv

SAMPLES = "Warp Stall Sampling (All Samples)"


def number(text: str) -> float:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def read_rows(path: str) -> list[dict]:
    """One dict per SASS instruction: address, source, opcode (predicate and modifiers stripped), executed count,
    stall samples per reason (issued and not-issued samples together)."""
    lines = list(csv.reader(open(path)))
    header = lines[1]  # line 0 names the kernel
    stall_cols = [h for h in header if h.startswith("stall_") and "(Not Issued)" not in h]
    rows = []
    for line in lines[2:]:
        if len(line) < len(header):
            continue
        cell = dict(zip(header, line))
        words = cell["Source"].split()
        if words and words[0].startswith("@"):
            words = words[1:]
        rows.append({"address": cell["Address"], "source": cell["Source"].strip(),
                     "opcode": words[0].split(".")[0] if words else "?",
                     "executed": number(cell["Instructions Executed"]), "samples": number(cell[SAMPLES]),
                     "stalls": {c[len("stall_"):]: number(cell[c]) for c in stall_cols}})
    return rows


def summary(rows: list[dict], top: int) -> list[str]:
    total = sum(r["executed"] for r in rows)
    ops = collections.Counter()
    by_reason = collections.defaultdict(collections.Counter)
    for r in rows:
        ops[r["opcode"]] += r["executed"]
        for reason, n in r["stalls"].items():
            by_reason[reason][r["opcode"]] += n
    samples = sum(sum(c.values()) for c in by_reason.values()) or 1.0
    out = [f"total warp instructions {total:.4g}"]
    out += [f"  {op:12s} {n:12.4g} {100 * n / total:5.1f}%" for op, n in ops.most_common(30)]
    out.append("stalls (share of all samples), and the opcodes they sit on:")
    for reason, counter in sorted(by_reason.items(), key=lambda kv: -sum(kv[1].values()))[:12]:
        mix = ", ".join(f"{op} {100 * n / samples:.1f}" for op, n in counter.most_common(8))
        out.append(f"  {reason:20s} {100 * sum(counter.values()) / samples:5.1f}%: {mix}")
    out.append("top stalled instructions:")
    for r in sorted(rows, key=lambda r: -r["samples"])[:top]:
        worst = sorted(r["stalls"].items(), key=lambda kv: -kv[1])[:2]
        out.append(f"  {100 * r['samples'] / samples:5.2f}% {r['address']} {r['source'][:60]:60s} "
                   f"n={r['executed']:.3g} {[(k, round(100 * v / samples, 2)) for k, v in worst]}")
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv")
    parser.add_argument("--top", type=int, default=25, help="most stalled instructions listed")
    parser.add_argument("--sites", help="comma-separated opcodes: list their instructions instead of the summary")
    parser.add_argument("--min-count", type=float, default=0.0, help="with --sites: executed more than this")
    args = parser.parse_args(argv)
    rows = read_rows(args.csv)
    if args.sites:
        wanted = set(args.sites.split(","))
        lines = [f"{r['address'][-5:]} {r['executed']:10.3g} {r['source'][:90]}" for r in rows
                 if r["opcode"] in wanted and r["executed"] > args.min_count]
    else:
        lines = summary(rows, args.top)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
