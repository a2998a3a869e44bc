"""A short demo of the API on whatever device is here: `python -m fa3nn.demo`.

Runs causal GQA attention, a sliding window with softcap, and a packed (varlen) batch; checks each against
fa3nn.testing.attention_ref by the error-ratio rule; prints which backend served each call and its error.
"""

from __future__ import annotations

import torch

import fa3nn
from fa3nn.testing import attention_ref, error_ratio_report, random_qkv


def _report(name, q, k, v, out, out_ref, out_pt, **kwargs):
    passed, numbers = error_ratio_report(out, out_ref, out_pt)
    print(f"{name:<28} backend={fa3nn.explain(q, k, v, **kwargs).forward:<10} {'ok ' if passed else 'FAIL'} {numbers}")
    return passed


def main() -> int:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float16
    print(f"fa3nn {fa3nn.__version__} on {device}, {dtype}; torch {torch.__version__}")
    results = []
    q, k, v = random_qkv(2, 256, 256, 8, 2, 64, dtype, device)
    for name, kwargs in (("causal GQA 8q/2kv heads", dict(causal=True)),
                         ("window (64, 0) + softcap 30", dict(causal=True, window_size=(64, -1), softcap=30.0))):
        out = fa3nn.flash_attn_func(q, k, v, **kwargs)
        ref, _ = attention_ref(q, k, v, **kwargs)
        pt, _ = attention_ref(q, k, v, upcast=False, reorder_ops=True, **kwargs)
        results.append(_report(name, q, k, v, out, ref, pt, **kwargs))

    lengths = [100, 37, 119]
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32, device=device)
    qp, kp, vp = (t.reshape(-1, *t.shape[2:])[: sum(lengths)] for t in random_qkv(1, sum(lengths), sum(lengths), 8,
                                                                                   2, 64, dtype, device))
    out = fa3nn.flash_attn_varlen_func(qp, kp, vp, cu, cu, max(lengths), max(lengths), causal=True)
    refs, pts = [], []
    for start, end in zip(cu[:-1].tolist(), cu[1:].tolist()):
        seq = [t[start:end][None] for t in (qp, kp, vp)]
        refs.append(attention_ref(*seq, causal=True)[0][0])
        pts.append(attention_ref(*seq, causal=True, upcast=False, reorder_ops=True)[0][0])
    results.append(_report(f"varlen {lengths}", qp, kp, vp, out, torch.cat(refs), torch.cat(pts), causal=True,
                           cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=max(lengths), max_seqlen_k=max(lengths)))
    print("all checks passed" if all(results) else "SOME CHECKS FAILED")
    return 0 if all(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
