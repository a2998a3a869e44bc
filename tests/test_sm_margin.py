"""FlashAttention-3's sm_margin (fa3nn.fa3_compat): SMs left free for kernels that overlap attention.

CPU: the value reaches the backend's forward and backward (eager and torch.compile, the FP8 ops, the KV-cache call),
the ops pass opcheck with it, and a backend that does not honour it is warned about once. GPU (`pytest -m gpu` on a
Hopper): the native main kernels launch at most SMs - sm_margin CTAs (the grids read from a torch.profiler trace),
and every result is the one without a margin: out / lse / dK / dV bitwise (each tile is computed the same way by
whichever CTA walks it), dQ (summed by reduce-adds in another order) within 1e-3 of its largest element, the sinks'
gradient within 1e-4 relative.
"""

from __future__ import annotations

import json
import re
import warnings

import pytest
import torch

import fa3nn
from fa3nn import fa3_compat
from fa3nn.backends.reference import ReferenceBackend
from fa3nn.ops import attention_backward, attention_forward
from fa3nn.testing import random_qkv


@pytest.fixture
def seen(monkeypatch):
    """The sm_margin of every AttnParams the reference backend's forward and backward receive."""
    record = {"forward": [], "backward": []}
    forward, backward = ReferenceBackend.forward, ReferenceBackend.backward

    def recording_forward(self, q, k, v, params, varlen, sinks=None):
        record["forward"].append(params.sm_margin)
        return forward(self, q, k, v, params, varlen, sinks)

    def recording_backward(self, dout, q, k, v, out, lse, dlse, params, varlen):
        record["backward"].append(params.sm_margin)
        return backward(self, dout, q, k, v, out, lse, dlse, params, varlen)

    monkeypatch.setattr(ReferenceBackend, "forward", recording_forward)
    monkeypatch.setattr(ReferenceBackend, "backward", recording_backward)
    monkeypatch.setattr(fa3_compat, "_warned_sm_margin", set())
    return record


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_sm_margin_reaches_the_backend_forward_and_backward(seen, compiled):
    q, k, v = random_qkv(2, 9, 13, 4, 2, 16, torch.float32, requires_grad=True)

    def call(q, k, v):
        return fa3nn.flash_attn_func(q, k, v, causal=True, sm_margin=5, backend="reference")

    fn = torch.compile(call, fullgraph=True, backend="aot_eager") if compiled else call
    if compiled:
        torch._dynamo.reset()
    with pytest.warns(UserWarning, match=r"sm_margin=5 is not honoured by the reference backend"):
        out = fn(q, k, v)
    out.sum().backward()
    assert seen == {"forward": [5], "backward": [5]}
    base = fa3nn.flash_attn_func(q, k, v, causal=True, backend="reference")
    assert torch.equal(out, base)  # the reference backend ignores it: same result


def test_sm_margin_reaches_varlen_chunked_fp8_and_kvcache_calls(seen):
    q, k, v = random_qkv(1, 12, 12, 4, 2, 16, torch.float32, requires_grad=True)
    cu = torch.tensor([0, 5, 12], dtype=torch.int32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the reference backend's, tested above)
        fa3nn.flash_attn_varlen_func(q[0], k[0], v[0], cu, cu, 7, 7, sm_margin=2, backend="reference").sum().backward()
        fa3nn.flash_attn_func(q, k, v, attention_chunk=4, sm_margin=3, backend="reference").sum().backward()
        fa3nn.flash_attn_with_kvcache(q.detach(), k.detach().clone(), v.detach().clone(), sm_margin=4,
                                      backend="reference")
    assert seen == {"forward": [2, 3, 4], "backward": [2, 3]}
    seen["forward"].clear()
    seen["backward"].clear()
    # FP8: the emulation serves the forward here (its path warns), the bf16 reference backward gets the margin.
    with pytest.warns(UserWarning, match=r"sm_margin=6 is not honoured by the fp8 emulation \(reference\) backend"):
        out = fa3nn.flash_attn_func(q, k, v, fp8="per_tile", sm_margin=6, backend="reference")
    out.sum().backward()
    assert seen == {"forward": [], "backward": [6]}


def test_a_backend_that_ignores_sm_margin_is_warned_about_once(seen):
    q, k, v = random_qkv(1, 5, 5, 2, 2, 8, torch.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fa3nn.flash_attn_func(q, k, v, backend="reference")  # no margin: no warning
        fa3nn.flash_attn_func(q, k, v, sm_margin=0, backend="reference")
    with pytest.warns(UserWarning, match=r"sm_margin=1 is not honoured by the reference backend.*the hopper backend "
                                         r"honours it"):
        fa3nn.flash_attn_func(q, k, v, sm_margin=1, backend="reference")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per backend
        fa3nn.flash_attn_func(q, k, v, sm_margin=2, backend="reference")


@pytest.mark.parametrize("bad,error,match", [(-1, ValueError, r"sm_margin must be >= 0 \(SMs to leave free\), got -1"),
                                             (1.0, TypeError, r"sm_margin must be an int \(SMs to leave free\)"),
                                             (True, TypeError, r"sm_margin must be an int")])
def test_bad_sm_margin_names_the_argument(bad, error, match):
    q, k, v = random_qkv(1, 5, 5, 2, 2, 8, torch.float32)
    with pytest.raises(error, match=match):
        fa3nn.flash_attn_func(q, k, v, sm_margin=bad)


def test_opcheck_with_sm_margin():
    q, k, v = random_qkv(2, 9, 13, 4, 2, 16, torch.float32)
    args = (q, k, v, None, None, 9, 13, 0.25, -1, 0, 0.0, False, "reference", None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.library.opcheck(attention_forward, (*args, 3))
        out, lse = attention_forward(*args, 3)
        torch.library.opcheck(attention_backward, (torch.randn_like(out), q, k, v, out, lse, None, *args[3:], 3))


# GPU: the native kernels' grids and results.
def _hopper_ready() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


needs_hopper = pytest.mark.skipif(not _hopper_ready(), reason="needs an sm_90 (Hopper) GPU")


def _kernel_grids(fn, tmp_path) -> tuple[object, dict[str, int]]:
    """(fn's result, {kernel name: largest gridDim.x of its launches}) from a torch.profiler trace of one call."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        result = fn()
        torch.cuda.synchronize()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    grids: dict[str, int] = {}
    for event in json.loads(path.read_text())["traceEvents"]:
        if str(event.get("cat", "")).lower() == "kernel" and "grid" in event.get("args", {}):
            name = event["name"]
            grids[name] = max(grids.get(name, 0), event["args"]["grid"][0])
    assert grids, "the trace holds no kernel with its grid (torch.profiler's chrome trace format changed?)"
    return result, grids


def _grid_of(grids: dict[str, int], kernel: str) -> int:
    """The grid of the one traced kernel whose demangled name holds `kernel` (a regular expression) as a function."""
    matches = [g for name, g in grids.items() if re.search(rf"::{kernel}<", name)]
    assert len(matches) == 1, f"expected one {kernel} kernel in the trace, got {sorted(grids)}"
    return matches[0]


# (head dim q / k, v, causal, window, softcap, nheads / nheads_kv, varlen, sinks): every main-kernel family the
# backward's persistent schedule serves with sm_margin, windows (never persistent without it) and varlen included.
CASES = {
    "d64": (64, 64, False, (-1, -1), 0.0, (8, 8), False, False),
    "d128_causal_gqa": (128, 128, True, (-1, -1), 0.0, (8, 2), False, False),
    "d256_causal": (256, 256, True, (-1, -1), 0.0, (4, 4), False, False),
    "mla_causal": (192, 128, True, (-1, -1), 0.0, (8, 8), False, False),
    "d128_window_softcap": (128, 128, False, (300, 0), 30.0, (8, 8), False, False),
    "d64_varlen_window": (64, 64, True, (200, 0), 0.0, (8, 4), True, False),
    "d128_varlen_sinks": (128, 128, True, (-1, -1), 0.0, (8, 8), True, True),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.gpu
@needs_hopper
def test_native_kernels_leave_the_margin_free_with_the_same_results(case, tmp_path):
    headdim, headdim_v, causal, window, softcap, (nheads, nheads_kv), varlen, with_sinks = CASES[case]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    torch.manual_seed(0)
    batch, seqlen = 2, 1500
    q = torch.randn(batch, seqlen, nheads, headdim, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(batch, seqlen, nheads_kv, headdim, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(batch, seqlen, nheads_kv, headdim_v, device="cuda", dtype=torch.bfloat16)
    dout = torch.randn(batch, seqlen, nheads, headdim_v, device="cuda", dtype=torch.bfloat16)
    sinks = torch.randn(nheads, device="cuda") if with_sinks else None
    options = dict(causal=causal, window_size=window, softcap=softcap, return_lse=True, backend="hopper")
    if varlen:  # two sequences of unequal lengths in the packed rows
        cu = torch.tensor([0, 1100, 2 * seqlen], dtype=torch.int32, device="cuda")
        q, k, v, dout = (t.flatten(0, 1) for t in (q, k, v, dout))

    def run(margin):
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        sink_leaf = None if sinks is None else sinks.clone().requires_grad_()
        if varlen:
            out, lse = fa3nn.flash_attn_varlen_func(*leaves, cu, cu, 1900, 1900, sm_margin=margin, sinks=sink_leaf,
                                                    **options)
        else:
            out, lse = fa3nn.flash_attn_func(*leaves, sm_margin=margin, sinks=sink_leaf, **options)
        out.backward(dout)
        return out, lse, *(t.grad for t in leaves), None if sink_leaf is None else sink_leaf.grad

    base = run(0)
    for margin in (sms - 7, sms - 1):  # 7 CTAs, and one CTA walking every tile
        got, grids = _kernel_grids(lambda margin=margin: run(margin), tmp_path)
        assert _grid_of(grids, "flash_fwd_kernel") == sms - margin
        assert _grid_of(grids, "flash_bwd_kernel") == sms - margin
        for name, a, b in zip(("out", "lse", "dq", "dk", "dv", "dsinks"), got, base):
            if name == "dq":
                torch.testing.assert_close(a, b, atol=1e-3 * b.float().abs().max().item(), rtol=1e-2)
            elif name == "dsinks":
                assert (a is None) == (b is None) == (sinks is None)
                if a is not None:
                    torch.testing.assert_close(a, b, atol=1e-4 * b.abs().max().item(), rtol=1e-4)
            else:
                assert torch.equal(a, b), f"sm_margin={margin} changed {name}"


@pytest.mark.gpu
@needs_hopper
def test_native_fp8_forward_leaves_the_margin_free(tmp_path):
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    q, k, v = random_qkv(2, 2048, 2048, 8, 8, 128, torch.bfloat16, device="cuda")
    base = fa3nn.flash_attn_func(q, k, v, causal=True, fp8="per_tile", backend="hopper")
    got, grids = _kernel_grids(
        lambda: fa3nn.flash_attn_func(q, k, v, causal=True, fp8="per_tile", sm_margin=sms - 5, backend="hopper"),
        tmp_path)
    assert _grid_of(grids, "flash_fwd_fp8(_tma_store)?_kernel") == 5
    assert torch.equal(got, base)


@pytest.mark.gpu
@needs_hopper
def test_a_margin_that_leaves_no_sm_is_refused():
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    q, k, v = random_qkv(1, 128, 128, 2, 2, 64, torch.bfloat16, device="cuda")
    with pytest.raises(ValueError, match=rf"sm_margin must leave at least one of the device's {sms} SMs to attention "
                                         rf"\(0 <= sm_margin < {sms}\), got {sms}"):
        fa3nn.flash_attn_func(q, k, v, sm_margin=sms, backend="hopper")
