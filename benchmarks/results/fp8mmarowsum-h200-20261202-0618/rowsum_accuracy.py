"""One-off (2026-12-02 tenth session): the row-sums-from-P V variant (40, built from mma_row_sum_promoted.patch)
against the default on normal, outlier and mean-1 V inputs: O's rms and mean error and lse's error against fp64
attention of the dequantized inputs (what the kernels compute, exactly), per-tile recipe, d128, non-causal."""

import torch

from fa3nn.backends import hopper_fp8 as H
from fa3nn.fp8.operands import transpose_v
from fa3nn.fp8.quantize import quantize_qkv_tensors
from fa3nn.testing.reference import attention_ref

H.VARIANTS["key_block_192_mma_row_sum"] = 40
H._FORCED_KEY_BLOCK["key_block_192_mma_row_sum"] = 192
torch.manual_seed(0)


def dequant(x8, descale, block):
    rows = descale.repeat_interleave(block, dim=-1)[..., : x8.shape[1]]  # (b, h, s)
    return x8.float() * rows.transpose(1, 2).unsqueeze(-1)


for name in ("normal", "outlier", "v_mean_1"):
    for seqlen in (2048, 8192):
        shape = (1, seqlen, 8, 128)
        q, k, v = (torch.randn(shape, device="cuda") for _ in range(3))
        if name == "outlier":
            q, k, v = (x + torch.randn(shape, device="cuda") * 10 * (torch.rand(shape, device="cuda") < 1e-3)
                       for x in (q, k, v))
        if name == "v_mean_1":
            v = v + 1
        q, k, v = (x.to(torch.bfloat16) for x in (q, k, v))
        quantized = quantize_qkv_tensors(q, k, v, 128, 384)
        qd, kd, vd = (dequant(x, d, b).double() for x, d, b in (
            (quantized.q, quantized.q_descale, 128), (quantized.k, quantized.k_descale, 384),
            (quantized.v, quantized.v_descale, 384)))
        out_t, lse_t = attention_ref(qd, kd, vd, softmax_scale=128**-0.5)
        row = []
        for variant in ("full", "key_block_192_mma_row_sum"):
            out, lse = H.fp8_forward(quantized.q, quantized.k, transpose_v(quantized.v), quantized.q_descale,
                                     quantized.k_descale, quantized.v_descale, 128, 384, 128**-0.5,
                                     variant=variant)
            err = out.double() - out_t
            rms_t = out_t.pow(2).mean().sqrt()
            dl = lse.double() - lse_t
            row.append(f"{variant}: O rms {(err.pow(2).mean().sqrt() / rms_t).item():.3e} "
                       f"mean {(err.mean() / rms_t).item():+.2e} | lse mean {dl.mean().item():+.2e} "
                       f"max {dl.abs().max().item():.2e}")
        print(f"{name:8s} {seqlen:5d}  " + "  ||  ".join(row), flush=True)
