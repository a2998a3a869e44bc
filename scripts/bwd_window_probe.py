"""One native window backward call per process (so a crashed kernel does not take the others down): head dim, query /
key lengths, window, causal, schedule from the command line; prints ok with the largest gradient difference against
the reference backward, or the error. For bisecting kernel failures on the GPU machine.

    python scripts/bwd_window_probe.py 64 512 512 128 0 1
"""

from __future__ import annotations

import sys

import torch

from fa3nn.backends import hopper_bwd
from fa3nn.backends.base import AttnParams
from fa3nn.backends.reference import ReferenceBackend
from fa3nn.masks import Window


def main() -> None:
    headdim, seqlen_q, seqlen_k, left, right, causal = (int(x) for x in sys.argv[1:7])
    q, k, v = (torch.randn(1, s, 2, headdim, device="cuda", dtype=torch.bfloat16)
               for s in (seqlen_q, seqlen_k, seqlen_k))
    params = AttnParams(softmax_scale=headdim**-0.5, window=Window.from_args(bool(causal), (left, right)),
                        softcap=0.0, deterministic=False)
    out, lse = ReferenceBackend().forward(q, k, v, params, None)
    dout = torch.randn_like(out)
    got = hopper_bwd.launch(dout, q, k, v, out, lse, params.softmax_scale, bool(causal), window_size=(left, right))
    torch.cuda.synchronize()
    ref = ReferenceBackend().backward(dout, q, k, v, out, lse, None, params, None)
    diff = max((a.float() - b.float()).abs().max().item() for a, b in zip(got, ref))
    print(f"ok d{headdim} {seqlen_q}x{seqlen_k} window ({left}, {right}) causal {causal}: max diff {diff:.3e}")


if __name__ == "__main__":
    main()
