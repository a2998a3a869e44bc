"""Dispatch decisions on calls this machine cannot make itself: a synthetic Hopper call (no GPU needed)."""

import dataclasses

import pytest
import torch

from fa3nn.backends.base import AttnCall
from fa3nn.dispatch import UnsupportedCall, resolve
from fa3nn.masks import Window


def hopper_call(**overrides) -> AttnCall:
    fields = dict(device_type="cuda", capability=(9, 0), dtype=torch.bfloat16, headdim=128, headdim_v=128, nheads=16,
                  nheads_kv=4, varlen=False, window=Window(-1, 0), softcap=0.0, deterministic=False)
    fields.update(overrides)
    return AttnCall(**fields)


def test_forced_backend_with_unsupported_headdim_names_it_and_the_alternatives():
    with pytest.raises(UnsupportedCall, match=r"backend='hopper' cannot run this forward call: headdim 96/96 is not "
                                              r"supported by the hopper backend \(q/k / v: 64/64, 128/128, 256/256, "
                                              r"192/128\).*can: "):
        resolve("hopper", hopper_call(headdim=96, headdim_v=96))


def test_softcap_runs_natively_both_ways(monkeypatch):
    """Softcap: the native forward and backward have it, forced or auto; at head dim 64 auto takes Triton's forward
    (as fast there: hopper.SOFTCAP_HEADDIMS) and still the native backward."""
    from fa3nn.backends import hopper_lib

    monkeypatch.setattr(hopper_lib.LIBRARY, "get", lambda: object())  # a synthetic call: no GPU, no build
    for call in (hopper_call(softcap=30.0), hopper_call(softcap=30.0, window=Window(64, 0), varlen=True)):
        for backend in ("hopper", "auto"):
            assert resolve(backend, call).name == "hopper"
            assert resolve(backend, call, backward=True).name == "hopper"
    d64 = hopper_call(softcap=30.0, headdim=64, headdim_v=64)  # Triton's softcap forward is faster at head dim 64
    assert resolve("auto", d64).name == "triton" and resolve("auto", d64, backward=True).name == "hopper"


def test_backward_the_forced_backend_refuses_falls_back_to_auto_order():
    """backend='hopper' trains wherever its forward runs: a backward the native kernels lack (deterministic=True: they
    sum dQ with atomics) runs where auto would run it (triton here), not an error."""
    for call in (hopper_call(deterministic=True), hopper_call(headdim=256, headdim_v=256, deterministic=True)):
        assert resolve("hopper", call, backward=True).name == "triton"
        assert resolve("auto", call, backward=True).name == "triton"


def test_dense_backward_resolves_to_hopper_when_the_library_loads(monkeypatch):
    from fa3nn.backends import hopper_lib

    monkeypatch.setattr(hopper_lib.LIBRARY, "get", lambda: object())  # a synthetic call: no GPU, no build
    assert resolve("auto", hopper_call(), backward=True).name == "hopper"
    assert resolve("auto", hopper_call(varlen=True), backward=True).name == "hopper"
    for varlen in (False, True):  # sliding windows: native forward and backward, dense and varlen
        window = hopper_call(window=Window(64, 0), varlen=varlen)
        assert resolve("auto", window).name == "hopper"
        assert resolve("auto", window, backward=True).name == "hopper"
    for headdim in (64, 256):  # every head dim of the native backward, dense and varlen
        call = dict(headdim=headdim, headdim_v=headdim)
        assert resolve("auto", hopper_call(**call), backward=True).name == "hopper"
        assert resolve("auto", hopper_call(varlen=True, **call), backward=True).name == "hopper"
    assert resolve("auto", hopper_call(deterministic=True), backward=True).name == "triton"


@pytest.fixture
def deterministic_algorithms():
    """torch.use_deterministic_algorithms(True) for one test, then back to what it was."""
    was, warn_only = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True)
    yield
    torch.use_deterministic_algorithms(was, warn_only=warn_only)


def test_use_deterministic_algorithms_asks_for_the_deterministic_backward(monkeypatch, deterministic_algorithms):
    """torch.use_deterministic_algorithms(True) is a deterministic=True for every call, so that the native backward's
    atomic dQ never runs under it (it ran there before: deterministic=False, the default, reached the dispatch as is).
    Checked on what the ops hand the dispatch, forward and backward, and on what explain reads."""
    import fa3nn
    from fa3nn import ops
    from fa3nn.checks import attention_params

    seen = []
    monkeypatch.setattr(ops, "resolve", lambda backend, call, backward=False: seen.append(call) or resolve(
        backend, call, backward))
    q = torch.randn(1, 4, 2, 16, requires_grad=True)
    fa3nn.flash_attn_func(q, q, q, deterministic=False).sum().backward()
    assert len(seen) == 2 and all(call.deterministic for call in seen)
    assert attention_params(q, None, False, (-1, -1), 0.0, False, None, "auto").deterministic
    assert resolve("auto", dataclasses.replace(hopper_call(), deterministic=seen[1].deterministic),
                   backward=True).name == "triton"
