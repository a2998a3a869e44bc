"""Is another build of the native forward the same function as this checkout's? Runs both libraries on the same
inputs and prints the largest absolute difference of out and lse per case (a build that only changes how the same
values are computed, e.g. FA3NN_FWD_DIAG_TRIM, should read exactly 0 everywhere). The cases reach every masked-block
shape the kernels have: the paper's causal and non-causal shapes, seqlens off the tiles, seqlen_q != seqlen_k both
ways, sliding windows, softcap, packed sequences, fp16. Exits 1 on any difference.

    python scripts/fwd_build_exactness.py --compare build/s53t/libfa3nn_hopper.so [--headdims 64 128 256]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_hopper import TOKENS, WIDTH  # noqa: E402

from fa3nn.backends import hopper_build  # noqa: E402
from fa3nn.backends.base import Varlen  # noqa: E402
from fa3nn.backends.hopper import launch  # noqa: E402

# (name, batch, seqlen_q, seqlen_k, causal, window, softcap, dtype); batch 0: the paper's (TOKENS // seqlen)
DENSE = [
    *(("paper", 0, n, n, causal, (-1, -1), 0.0, torch.bfloat16) for n in (512, 1024, 2048, 8192)
      for causal in (True, False)),
    ("odd", 2, 1000, 1000, True, (-1, -1), 0.0, torch.bfloat16),
    ("odd", 3, 777, 777, True, (-1, -1), 0.0, torch.bfloat16),
    ("q < k", 2, 300, 1100, True, (-1, -1), 0.0, torch.bfloat16),
    ("q > k", 2, 1100, 300, True, (-1, -1), 0.0, torch.bfloat16),
    ("window", 2, 2048, 2048, False, (128, 0), 0.0, torch.bfloat16),
    ("window", 2, 1500, 1700, False, (100, 40), 0.0, torch.bfloat16),
    ("softcap", 2, 1024, 1024, True, (-1, -1), 30.0, torch.bfloat16),
    ("fp16", 4, 2048, 2048, True, (-1, -1), 0.0, torch.float16),
]
VARLEN_LENGTHS = [100, 513, 1000, 2048, 64, 1537]


def compare(headdim: int, q, k, v, library, **kwargs) -> tuple[float, float]:
    scale = headdim ** -0.5
    out_a, lse_a = launch(q, k, v, scale, **kwargs)
    out_b, lse_b = launch(q, k, v, scale, library=library, **kwargs)
    finite = torch.isfinite(lse_a)
    d_lse = (lse_a[finite] - lse_b[finite]).abs().max().item() if finite.any() else 0.0
    if not torch.equal(finite, torch.isfinite(lse_b)):
        d_lse = float("inf")
    return (out_a.float() - out_b.float()).abs().max().item(), d_lse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compare", required=True, metavar="PATH", help="the other build's library")
    parser.add_argument("--headdims", type=int, nargs="+", default=[64, 128, 256])
    args = parser.parse_args()
    library = hopper_build.load(Path(args.compare))
    print("| d | case | batch | seqlen q / k | causal | window | softcap | dtype | max abs diff out | lse |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    worst = 0.0
    for headdim in args.headdims:
        nheads = WIDTH // headdim
        for name, batch, sq, sk, causal, window, softcap, dtype in DENSE:
            batch = batch or TOKENS // sq
            gen = torch.Generator(device="cuda").manual_seed(sq + 7 * sk + headdim)
            q = torch.randn(batch, sq, nheads, headdim, device="cuda", dtype=dtype, generator=gen)
            k, v = (torch.randn(batch, sk, nheads, headdim, device="cuda", dtype=dtype, generator=gen)
                    for _ in range(2))
            d_out, d_lse = compare(headdim, q, k, v, library, causal=causal, window_size=window, softcap=softcap)
            worst = max(worst, d_out, d_lse)
            print(f"| {headdim} | {name} | {batch} | {sq} / {sk} | {causal} | {window} | {softcap} | "
                  f"{str(dtype)[6:]} | {d_out:.3g} | {d_lse:.3g} |")
        starts = [0]
        for n in VARLEN_LENGTHS:
            starts.append(starts[-1] + n)
        cu = torch.tensor(starts, device="cuda", dtype=torch.int32)
        varlen = Varlen(cu, cu, max(VARLEN_LENGTHS), max(VARLEN_LENGTHS), tuple(starts), tuple(starts))
        gen = torch.Generator(device="cuda").manual_seed(headdim)
        q, k, v = (torch.randn(starts[-1], nheads, headdim, device="cuda", dtype=torch.bfloat16, generator=gen)
                   for _ in range(3))
        for deal in ("dynamic", "static"):
            d_out, d_lse = compare(headdim, q, k, v, library, causal=True, varlen=varlen, varlen_deal=deal)
            worst = max(worst, d_out, d_lse)
            print(f"| {headdim} | varlen {deal} | {len(VARLEN_LENGTHS)} | {VARLEN_LENGTHS} | True | (-1, -1) | 0.0 | "
                  f"bfloat16 | {d_out:.3g} | {d_lse:.3g} |")
    print(f"worst {worst:.3g}")
    sys.exit(0 if worst == 0.0 else 1)


if __name__ == "__main__":
    main()
