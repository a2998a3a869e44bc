"""The Triton backend on a CUDA GPU (`pytest -m gpu`): bf16 and fp16, head dims 32..256, FA3's sequence-length
pairs plus (4224, 4224) and (8192, 8192), every feature, through the error-ratio rule.

Every output is allocated NaN-filled (launch.POISON_OUTPUTS), so an element a kernel fails to write fails the rule;
inputs are fresh N(0, 1) draws. Tiles are the pinned ones (configs.tile_for; FA3NN_TRITON_AUTOTUNE=0 makes sure):
small shapes run them shrunk by the short-grid rule, (2048, 2048) runs the 1k-4k bucket's, the large pairs the
longest bucket's.
"""

from __future__ import annotations

import pytest
import torch
from test_triton_helpers import check_dense, check_varlen

from fa3nn import flash_attn_func

pytestmark = pytest.mark.gpu

SMALL_SEQLENS = [(1, 1), (17, 113), (113, 203), (239, 1), (128, 128), (1024, 1024)]
LARGE_SEQLENS = [(4224, 4224), (8192, 8192)]
HEADDIMS = [32, 64, 96, 128, 192, 256]


@pytest.fixture(autouse=True)
def poisoned_pinned_tiles(monkeypatch):
    pytest.importorskip("triton")
    from fa3nn.backends.triton import launch

    monkeypatch.setattr(launch, "POISON_OUTPUTS", True)
    monkeypatch.setenv("FA3NN_TRITON_AUTOTUNE", "0")


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize(
    "dtype,headdim", [(torch.bfloat16, d) for d in HEADDIMS] + [(torch.float16, d) for d in (64, 128, 256)], ids=str
)
def test_seqlen_pairs(dtype, headdim, causal):
    """All small pairs for every head dim (fp16: the FA3 paper's three); the large pairs for bf16 at 64/128/256,
    where a dense fp32 reference is still cheap."""
    seqlens = SMALL_SEQLENS + (LARGE_SEQLENS if dtype == torch.bfloat16 and headdim in (64, 128, 256) else [])
    for seqlen_q, seqlen_k in seqlens:
        batch = 2 if seqlen_q * seqlen_k <= 1 << 20 else 1
        check_dense(batch, seqlen_q, seqlen_k, 2, 2, headdim, dtype, "cuda", causal=causal)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("headdim", [64, 128, 256])
def test_middle_sequence_bucket(headdim, causal):
    """The tiles pinned for 1k < seqlen <= 4k, which the pairs above never reach."""
    check_dense(1, 2048, 2048, 2, 2, headdim, torch.bfloat16, "cuda", causal=causal)


@pytest.mark.parametrize("headdim", [64, 128])
@pytest.mark.parametrize(
    "causal,window", [(False, (64, 32)), (True, (100, -1)), (False, (-1, 7)), (False, (3, -1))], ids=str
)
def test_sliding_window(headdim, causal, window):
    for seqlen_q, seqlen_k in [(113, 203), (239, 17), (1024, 1024)]:
        check_dense(2, seqlen_q, seqlen_k, 2, 2, headdim, torch.bfloat16, "cuda", causal=causal, window=window)


@pytest.mark.parametrize("headdim", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_softcap(headdim, causal):
    for seqlen_q, seqlen_k in [(113, 203), (1024, 1024)]:
        check_dense(2, seqlen_q, seqlen_k, 2, 2, headdim, torch.bfloat16, "cuda", causal=causal, softcap=30.0)


@pytest.mark.parametrize("nheads,nheads_kv", [(8, 2), (6, 1)], ids=["gqa", "mqa"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_gqa_mqa(nheads, nheads_kv, causal):
    for seqlen_q, seqlen_k in [(17, 113), (1024, 1024)]:
        check_dense(2, seqlen_q, seqlen_k, nheads, nheads_kv, 128, torch.bfloat16, "cuda", causal=causal)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("causal,window", [(False, (-1, -1)), (True, (-1, -1)), (False, (32, 16))], ids=str)
def test_varlen(dtype, causal, window):
    check_varlen(5, 300, 417, 4, 2, 128, dtype, "cuda", causal=causal, window=window)


def test_lse_gradient_and_headdim_v():
    check_dense(2, 200, 333, 4, 2, 128, torch.bfloat16, "cuda", causal=True, lse_grad=True)
    check_dense(2, 130, 257, 2, 1, 64, torch.bfloat16, "cuda", causal=False, headdim_v=128)


def test_deterministic_backward_is_bitwise_repeatable():
    (q, k, v, grad_out), first = check_dense(2, 1024, 1024, 8, 2, 128, torch.bfloat16, "cuda", causal=True,
                                             deterministic=True)
    for _ in range(3):
        out = flash_attn_func(q, k, v, causal=True, deterministic=True, backend="triton")
        again = torch.autograd.grad(out, (q, k, v), grad_out)
        for name, a, b in zip(("dq", "dk", "dv"), first, again):
            assert torch.equal(a, b), f"{name} differs between identical runs"


def test_atomic_dq_path(monkeypatch):
    """FA3NN_TRITON_ATOMIC_DQ=1: dQ by atomics from the dK/dV kernel (opt-in); the other tests cover the default."""
    from fa3nn.backends.triton import launch

    monkeypatch.setattr(launch, "ATOMIC_DQ", True)
    check_dense(2, 239, 1024, 4, 1, 64, torch.bfloat16, "cuda", causal=True, window=(100, -1), softcap=20.0)
    check_dense(2, 1024, 1024, 8, 2, 128, torch.bfloat16, "cuda", causal=False)
    check_varlen(5, 300, 417, 4, 2, 128, torch.float16, "cuda", causal=True)
    # d256: the output split's dK kernel adds dQ ("dk_dq", TMA reduce-adds of whole tiles)
    check_dense(2, 1024, 1024, 4, 2, 256, torch.bfloat16, "cuda", causal=False)
    check_dense(1, 4224, 4224, 8, 2, 256, torch.bfloat16, "cuda", causal=True)
    check_varlen(5, 300, 417, 4, 2, 256, torch.float16, "cuda", causal=True)


@pytest.mark.parametrize("headdim", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_output_split(headdim, causal, monkeypatch):
    """FA3NN_TRITON_DKDV_OUTPUTS=split (the dV and dK kernels; the d256 default) at each pinned tile's sequence
    bucket, on one stream and with the dQ kernel on a second (FA3NN_TRITON_BWD_STREAMS, the default): every output
    through the rule, poisoned."""
    from fa3nn.backends.triton import launch

    monkeypatch.setattr(launch, "DKDV_OUTPUTS", "split")
    monkeypatch.setattr(launch, "BWD_STREAMS", False)
    check_dense(2, 1024, 1024, 4, 2, headdim, torch.bfloat16, "cuda", causal=causal)
    monkeypatch.setattr(launch, "BWD_STREAMS", True)
    check_dense(1, 4224, 4224, 2048 // headdim // 2, 2048 // headdim // 4, headdim, torch.bfloat16, "cuda",
                causal=causal, window=(-1, -1) if causal else (700, 300))


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_head_dim_split(causal, monkeypatch):
    """FA3NN_TRITON_DKDV_OUTPUTS=joint at d256 / d192: the head-dim split dK/dV kernel (the default before the output
    split), on the key-block kernel's pinned tiles of every bucket."""
    from fa3nn.backends.triton import launch

    monkeypatch.setattr(launch, "DKDV_OUTPUTS", "joint")
    check_dense(2, 1024, 1024, 4, 2, 256, torch.bfloat16, "cuda", causal=causal)
    check_dense(1, 4224, 4224, 8, 2, 192, torch.bfloat16, "cuda", causal=causal)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_tma_batched(causal, monkeypatch):
    """FA3NN_TRITON_TMA_BATCHED=1 (forced; by default where configs.TMA_BATCHED says), with every descriptor path on
    (the forward's Q / K / V, the dK/dV kernel's Q / dO, the dQ kernel's K / V): (batch, seqlen, heads * dim) views,
    rows past each sequence zero-filled by the copy engine instead of in the kernels: ragged, GQA and long pairs
    through the rule, poisoned, at d64 / d128 / d256; and bitwise the output and gradients of the (rows, heads *
    dim) descriptors, whose masked runs zero the same rows (or mask their scores)."""
    from fa3nn.backends.triton import launch

    monkeypatch.setattr(launch, "DKDV_TMA_LOADS", "1")
    monkeypatch.setattr(launch, "DQ_TMA_LOADS", "1")
    monkeypatch.setattr(launch, "TMA_BATCHED", "1")
    for headdim in (64, 128, 256):  # d256: the forward's 3-stage tile fitted to the batched views' buffers
        check_dense(2, 239, 1024, 4, 2, headdim, torch.bfloat16, "cuda", causal=causal)
        check_dense(1, 4224, 4224, 2048 // headdim // 2, 2048 // headdim // 4, headdim, torch.bfloat16, "cuda",
                    causal=causal)
    q = torch.randn(2, 1000, 8, 128, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(2, 1500, 4, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    grad_out = torch.randn_like(q)
    results = {}
    for batched in (False, True):
        monkeypatch.setattr(launch, "TMA_BATCHED", "1" if batched else "0")
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        out = flash_attn_func(*leaves, causal=causal, backend="triton")
        results[batched] = (out.detach(), *torch.autograd.grad(out, leaves, grad_out))
    for name, a, b in zip(("out", "dq", "dk", "dv"), results[False], results[True]):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("headdim", [128, 256])
def test_second_stream_is_bitwise_the_default(headdim, monkeypatch):
    """FA3NN_TRITON_BWD_STREAMS (the default) runs the same kernels, only concurrently: the same gradients bit for
    bit as one stream, and the caller's stream sees them finished (read on it right after the call); d256 runs the
    output split (a dV and a dK kernel, the dV kernel not reading delta)."""
    from fa3nn.backends.triton import launch

    q, k, v = (torch.randn(2, 2048, 1024 // headdim, headdim, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    grad_out = torch.randn_like(q)
    grads = {}
    for streams in (False, True):
        monkeypatch.setattr(launch, "BWD_STREAMS", streams)
        out = flash_attn_func(q, k, v, causal=True, backend="triton")
        grads[streams] = [g.clone() for g in torch.autograd.grad(out, (q, k, v), grad_out)]
    for name, a, b in zip(("dq", "dk", "dv"), grads[False], grads[True]):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("headdim", [128, 256])
def test_backward_graph_capturable(headdim):
    """The backward, the dQ kernel on its second stream (and at d256 the output split's two kernels) included, captured
    in a CUDA graph and replayed on new dout: the same gradients as an eager call on it, bit for bit."""
    from fa3nn.backends.base import AttnParams
    from fa3nn.backends.triton import launch
    from fa3nn.masks import Window

    assert launch.BWD_STREAMS
    q, k, v, dout = (torch.randn(2, 1024, 2048 // headdim, headdim, device="cuda", dtype=torch.bfloat16)
                     for _ in range(4))
    params = AttnParams(headdim ** -0.5, Window.from_args(True, (-1, -1)), 0.0, False)
    out, lse = launch.forward(q, k, v, params, None)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up (compiles) off the capture, as torch.cuda.graph asks
        static = [g.clone() for g in launch.backward(dout, q, k, v, out, lse, None, params, None)]
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for held, grad in zip(static, launch.backward(dout, q, k, v, out, lse, None, params, None)):
            held.copy_(grad)
    dout.copy_(torch.randn_like(dout))
    graph.replay()
    torch.cuda.synchronize()
    for name, replayed, eager in zip(("dq", "dk", "dv"), static, launch.backward(dout, q, k, v, out, lse, None,
                                                                                   params, None)):
        assert torch.equal(replayed, eager), name
