"""One small call of the native Hopper forward, checked against the reference: the case to run under
`compute-sanitizer --tool memcheck|racecheck|synccheck python scripts/hopper_small_case.py [options]`.

The default is a causal GQA varlen call at head dim 64 (direct O stores, the path varlen takes). --dense runs a dense
batch instead, which at head dims 128/256 leaves through the TMA-store epilogue wherever the tiles double-buffer Q
(d128 short calls, d256 calls of max_seqlen_q <= 1024 causal / <= 512 non-causal: 128 x 48 tiles), and --seqlen picks
the tile shape through the launcher's length rules (kernels/hopper/flash_fwd_launch.cuh, ShortCallSeqlen).

    compute-sanitizer --tool racecheck python scripts/hopper_small_case.py --dense --headdim 256 --seqlen 300
"""

import argparse

import torch

import fa3nn
from fa3nn.testing import assert_error_ratio, attention_ref, random_padding_mask, random_qkv, unpad

parser = argparse.ArgumentParser()
parser.add_argument("--headdim", type=int, default=64, choices=(64, 128, 256))
parser.add_argument("--seqlen", type=int, default=200)
parser.add_argument("--batch", type=int, default=3)
parser.add_argument("--dense", action="store_true", help="a dense batch (default: varlen with random padding)")
parser.add_argument("--non-causal", action="store_true")
args = parser.parse_args()
causal = not args.non_causal

torch.manual_seed(0)
q, k, v = random_qkv(args.batch, args.seqlen, args.seqlen, 4, 2, args.headdim, torch.bfloat16, device="cuda")
if args.dense:
    mask_q = mask_k = None
    full = fa3nn.flash_attn_func(q, k, v, causal=causal, backend="hopper")
else:
    mask_q = random_padding_mask(args.batch, args.seqlen, device="cuda")
    mask_k = random_padding_mask(args.batch, args.seqlen, device="cuda")
    (qp, cu_q, max_q), (kp, cu_k, max_k), (vp, _, _) = unpad(q, mask_q), unpad(k, mask_k), unpad(v, mask_k)
    out = fa3nn.flash_attn_varlen_func(qp, kp, vp, cu_q, cu_k, max_q, max_k, causal=causal, backend="hopper")
    full = torch.zeros_like(q)
    full[mask_q] = out
ref, _ = attention_ref(q, k, v, mask_q, mask_k, causal=causal)
pt, _ = attention_ref(q, k, v, mask_q, mask_k, causal=causal, upcast=False, reorder_ops=True)
assert_error_ratio(full, ref, pt)
torch.cuda.synchronize()
layout = "dense" if args.dense else "varlen"
print(f"small {'causal' if causal else 'non-causal'} GQA {layout} case, d{args.headdim}, seqlen {args.seqlen}: ok")
