"""The public surface: FlashAttentionV3, explain, metrics, the test kit's own rule, and packaging facts."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import fa3nn
from fa3nn.metrics import attention_flops
from fa3nn.testing import error_ratio_report, random_qkv

REPO = Path(__file__).resolve().parents[1]


def test_module_matches_functions_dense_and_varlen():
    attn = fa3nn.FlashAttentionV3(causal=True, window_size=(5, -1), softcap=3.0, softmax_scale=0.2)
    q, k, v = random_qkv(2, 11, 11, 4, 2, 16, torch.float32)
    expected = fa3nn.flash_attn_func(q, k, v, causal=True, window_size=(5, -1), softcap=3.0, softmax_scale=0.2)
    assert torch.equal(attn(q, k, v), expected)
    cu = torch.tensor([0, 11, 22], dtype=torch.int32)
    packed = [t.reshape(22, *t.shape[2:]) for t in (q, k, v)]
    torch.testing.assert_close(attn(*packed, cu, cu, 11, 11), expected.reshape(22, 4, 16), rtol=0, atol=0)


def test_module_state_dict_round_trips():
    attn = fa3nn.FlashAttentionV3(causal=True)
    restored = fa3nn.FlashAttentionV3(causal=True)
    restored.load_state_dict(attn.state_dict())
    assert "causal=True" in repr(attn)


def test_module_repr_shows_every_option():
    """repr names each non-default option the layer was built with (deterministic=True was left out)."""
    attn = fa3nn.FlashAttentionV3(deterministic=True, backend="reference", attention_chunk=8)
    assert repr(attn) == ("FlashAttentionV3(causal=False, softmax_scale=None, window_size=(-1, -1), softcap=0.0, "
                          "backend='reference', fp8=None, layer_idx=0, deterministic=True, attention_chunk=8)")
    assert "deterministic" not in repr(fa3nn.FlashAttentionV3())


def test_default_scale_is_inverse_sqrt_headdim():
    q, k, v = random_qkv(1, 7, 9, 2, 2, 64, torch.float64)
    torch.testing.assert_close(fa3nn.flash_attn_func(q, k, v), fa3nn.flash_attn_func(q, k, v, softmax_scale=0.125))


def test_causal_overrides_right_window_like_fa3():
    q, k, v = random_qkv(1, 7, 9, 2, 2, 16, torch.float64)
    torch.testing.assert_close(
        fa3nn.flash_attn_func(q, k, v, causal=True, window_size=(3, 5)),
        fa3nn.flash_attn_func(q, k, v, window_size=(3, 0)),
    )


def test_window_kernel_sides_keep_the_mask():
    """Window.kernel_sides (what the Triton and native launchers pass their int32 kernels) bounds each side by the
    sequences' lengths: the same mask for every shorter (varlen) sequence, -1 kept, sides within the lengths kept."""
    from fa3nn.masks import Window

    big = 2**31 - 1
    assert Window(big, big).kernel_sides(40, 50) == (50, 40)
    assert Window(-1, 2**31 - 60).kernel_sides(40, 50) == (-1, 40)
    assert Window(7, 0).kernel_sides(40, 50) == (7, 0) and Window(-1, -1).kernel_sides(40, 50) == (-1, -1)
    for window in (Window(big, big), Window(big, 0), Window(0, big), Window(-1, big), Window(big, -1), Window(60, 3),
                   Window(3, 45), Window(0, 0)):
        bounded = Window(*window.kernel_sides(40, 50))
        for seqlen_q, seqlen_k in ((40, 50), (40, 1), (1, 50), (17, 23), (40, 40), (33, 7)):  # up to (40, 50)
            got = bounded.allowed(0, seqlen_q, seqlen_q, seqlen_k, "cpu")
            want = window.allowed(0, seqlen_q, seqlen_q, seqlen_k, "cpu")
            assert torch.equal(got, want), (window, seqlen_q, seqlen_k)


def test_explain_names_backends_and_reasons():
    q, k, v = random_qkv(1, 8, 8, 2, 2, 64, torch.bfloat16)
    explanation = fa3nn.explain(q, k, v, causal=True)
    assert (explanation.forward, explanation.backward) == ("reference", "reference")
    assert set(explanation.forward_refusals) == {"hopper", "triton"}
    assert all(reason for reason in explanation.forward_refusals.values())
    assert "forward: reference" in str(explanation)
    assert fa3nn.explain(q, k, v, backend="triton").forward == "none"


def test_attention_flops_formula():
    # 4 * b * h * s^2 * d forward, halved when causal, backward 2.5x (the FlashAttention-3 paper's count).
    assert attention_flops(2, 16, 1024, 1024, 128) == 4 * 2 * 16 * 1024**2 * 128
    assert attention_flops(2, 16, 1024, 1024, 128, causal=True) == 2 * 2 * 16 * 1024**2 * 128
    assert attention_flops(1, 1, 8, 8, 64, direction="bwd") == 2.5 * 4 * 64 * 64
    with pytest.raises(ValueError, match="direction"):
        attention_flops(1, 1, 8, 8, 64, direction="both")


def test_error_ratio_rule_can_fail():
    ref = torch.randn(1000, dtype=torch.float64)
    pt = ref + 1e-3 * torch.randn_like(ref)
    assert error_ratio_report(ref + 1e-3, ref, pt)[0]  # within 2x the pt error
    assert not error_ratio_report(ref + 1e-2, ref, pt)[0]  # 10x the pt error
    invented_nan = ref.clone()
    invented_nan[3] = float("nan")
    assert not error_ratio_report(invented_nan, ref, pt)[0]
    lost_inf = ref.clone()
    ref_inf = ref.clone()
    ref_inf[5] = float("-inf")
    assert not error_ratio_report(lost_inf, ref_inf, ref_inf)[0]


def test_kernels_dir_is_not_a_package():
    assert not (REPO / "kernels" / "__init__.py").exists()
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert config["tool"]["setuptools"]["packages"]["find"]["include"] == ["fa3nn*"]


def test_repo_root_does_not_shadow_hf_kernels_package(tmp_path):
    pytest.importorskip("transformers")
    probe = "from transformers.utils import is_kernels_available; print(is_kernels_available())"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def answer(cwd):
        done = subprocess.run([sys.executable, "-c", probe], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout.strip().splitlines()[-1]

    assert answer(REPO) == answer(tmp_path)
