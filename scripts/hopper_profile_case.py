"""Run one native Hopper kernel a few times at one FA3-paper shape, for a profiler to attach to:

    ncu --clock-control none -k regex:flash_fwd_kernel --launch-skip 2 --launch-count 1 --set full \\
        python scripts/hopper_profile_case.py --kernel fwd --headdim 128 --seqlen 16384

--kernel fwd: the bf16 forward (flash_fwd_kernel); fp8: the FP8 forward (flash_fwd_fp8_kernel) on inputs already
quantized with per-tile scales, 128-row Q tiles and K/V tiles of --block-k rows (default: the recipe's, 192 at head
dim 128, else 128; the kernel's key block follows, fa3nn.fp8.key_blocks), --variant one of its benchmark variants;
bwd: the bf16 backward in its default variant or --bwd-variant (flash_bwd_kernel, between its preprocess and
postprocess kernels);
cudnn: cuDNN's forward through torch SDPA (the comparator of scripts/bench.py) on the same inputs; cudnn-bwd: its
backward (the forward run once before).
--varlen (fwd, bwd): the same batch as packed sequences of --seqlen rows each (uniform cu_seqlens), the varlen
kernels on the dense call's work.
The last call runs inside the NVTX range "profiled", so a profiler can take every kernel of one call:
    ncu --nvtx --nvtx-include "profiled/" --section LaunchStats python scripts/hopper_profile_case.py --kernel cudnn-bwd
"""

import argparse

import torch

from fa3nn.backends import hopper_bwd
from fa3nn.backends.base import Varlen
from fa3nn.backends.hopper import launch
from fa3nn.backends.hopper_fp8 import fp8_forward
from fa3nn.fp8.key_blocks import default_block_k
from fa3nn.fp8.operands import transpose_v
from fa3nn.fp8.quantize import quantize_qkv_tensors
from fa3nn.masks import Window

parser = argparse.ArgumentParser()
parser.add_argument("--kernel", choices=("fwd", "fp8", "bwd", "cudnn", "cudnn-bwd"), default="fwd")
parser.add_argument("--headdim", type=int, default=128)
parser.add_argument("--headdim-v", type=int, default=None,
                    help="V's head dim when it differs (fwd / bwd / cudnn[-bwd]; MLA: --headdim 192 --headdim-v 128)")
parser.add_argument("--seqlen", type=int, default=16384)
parser.add_argument("--causal", action="store_true")
parser.add_argument("--calls", type=int, default=3)
parser.add_argument("--block-k", type=int, default=None)
parser.add_argument("--variant", default="full", help="FP8 benchmark variant (fa3nn.backends.hopper_fp8.VARIANTS)")
parser.add_argument("--varlen", action="store_true", help="fwd / bwd: uniform packed sequences (varlen kernels)")
parser.add_argument("--bwd-variant", default=None, help="--kernel bwd: hopper_bwd.VARIANTS (default: the head dim's)")
args = parser.parse_args()
batch, nheads = 16384 // args.seqlen, 2048 // args.headdim
scale = args.headdim**-0.5
if args.headdim_v is not None and args.kernel == "fp8":
    parser.error("--headdim-v is for --kernel fwd / bwd / cudnn / cudnn-bwd")
if args.varlen and args.kernel not in ("fwd", "bwd"):
    parser.error("--varlen is for --kernel fwd / bwd")
q, k, v = (torch.randn(batch, args.seqlen, nheads, d, device="cuda", dtype=torch.bfloat16)
           for d in (args.headdim, args.headdim, args.headdim_v or args.headdim))
varlen = None
if args.varlen:
    q, k, v = (x.reshape(-1, *x.shape[2:]) for x in (q, k, v))
    starts = tuple(range(0, batch * args.seqlen + 1, args.seqlen))
    cu = torch.tensor(starts, dtype=torch.int32, device="cuda")
    varlen = Varlen(cu, cu, args.seqlen, args.seqlen, starts, starts)
if args.kernel == "fwd":
    def call():
        launch(q, k, v, scale, args.causal, varlen)
elif args.kernel == "fp8":
    block_k = args.block_k or default_block_k(args.headdim)
    quantized = quantize_qkv_tensors(q, k, v, 128, block_k)
    vt8 = transpose_v(quantized.v)
    window = Window(-1, 0) if args.causal else Window()

    def call():
        fp8_forward(quantized.q, quantized.k, vt8, quantized.q_descale, quantized.k_descale, quantized.v_descale,
                    128, block_k, scale, window, variant=args.variant)
elif args.kernel in ("cudnn", "cudnn-bwd"):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backward = args.kernel == "cudnn-bwd"
    qt, kt, vt = (x.transpose(1, 2).requires_grad_(backward) for x in (q, k, v))

    def sdpa():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=args.causal, scale=scale)
    if backward:
        out = sdpa()
        dout = torch.randn_like(out)

        def call():  # on this thread (autograd's device threads would run it outside the NVTX range)
            with torch.autograd.set_multithreading_enabled(False):
                torch.autograd.grad(out, (qt, kt, vt), dout, retain_graph=True)
    else:
        call = sdpa
else:
    out, lse = launch(q, k, v, scale, args.causal, varlen)
    dout = torch.randn_like(out)

    def call():
        hopper_bwd.launch(dout, q, k, v, out, lse, scale, args.causal, variant=args.bwd_variant, varlen=varlen)
for _ in range(args.calls - 1):
    call()
torch.cuda.nvtx.range_push("profiled")
call()
torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
print(f"ran {args.calls} calls of {args.kernel}: d{args.headdim} / {args.headdim_v or args.headdim} "
      f"seqlen {args.seqlen} causal={args.causal}{' varlen' if args.varlen else ''}")
