"""RMSE of per-tile + incoherent FP8 (the CPU emulation) with 192- against 256-key K/V tiles and blocks, on
scripts/fp8_accuracy.py's outlier inputs (batch 1, 8 heads, head dim 128), per seed. From the repository root:

    python benchmarks/results/fp8tiles-cpu-20261202/tile_rmse.py 8192 0,1,2
"""

import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT / "scripts"), str(ROOT)]

from fp8_accuracy import outlier_qkv, rmse  # noqa: E402

from fa3nn import flash_attn_func  # noqa: E402
from fa3nn.fp8 import PerTileScaling, attention_fp8, make_state, quantize_qkv  # noqa: E402


def main() -> None:
    torch.set_grad_enabled(False)
    seqlen = int(sys.argv[1]) if len(sys.argv) > 1 else 8192
    seeds = [int(s) for s in sys.argv[2].split(",")] if len(sys.argv) > 2 else [0, 1, 2]
    errors: dict[int, list[float]] = {}
    for seed in seeds:
        start = time.time()
        q, k, v = outlier_qkv(1, seqlen, 8, 128, seed)
        ref = flash_attn_func(q.double(), k.double(), v.double(), backend="reference")
        for block_k in (192, 256):
            recipe = PerTileScaling(incoherent=True, block_k=block_k)
            quantized = quantize_qkv(q, k, v, recipe, make_state(recipe, layer_idx=0))
            out, _ = attention_fp8(quantized, 128**-0.5, block_n=block_k)
            errors.setdefault(block_k, []).append(rmse(out, ref))
        print(seqlen, seed, {b: f"{e[-1]:.4e}" for b, e in errors.items()}, f"{time.time() - start:.0f}s", flush=True)
    print(seqlen, {b: f"{sum(e) / len(e):.4e}" for b, e in errors.items()})


if __name__ == "__main__":
    main()
