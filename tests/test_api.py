"""The public surface: FlashAttentionV3, explain, metrics, the test kit's own rule, and packaging facts."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import fa3nn
from fa3nn.metrics import attention_flops
from fa3nn.testing import attention_ref, error_ratio_report, random_qkv

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


@pytest.mark.parametrize("scale", [0.0, -0.2])
def test_zero_and_negative_softmax_scale_are_taken_as_given(scale):
    """softmax_scale=0.0 is a scale, not "use the default": read as falsy (`not softmax_scale`) it became 16**-0.5 =
    0.25 and every output row moved off the mean of its values. Float64 on the reference backend against attention_ref
    (1e-12), negative too; at 0.0 each causal row is the uniform mean of the keys it may attend (tests/test_hopper.py
    covers this on the GPU only)."""
    q, k, v = random_qkv(2, 9, 13, 4, 2, 16, torch.float64)
    out, lse = fa3nn.flash_attn_func(q, k, v, causal=True, softmax_scale=scale, return_lse=True, backend="reference")
    out_ref, lse_ref = attention_ref(q, k, v, causal=True, softmax_scale=scale)
    torch.testing.assert_close(out, out_ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(lse, lse_ref, rtol=1e-12, atol=1e-12)
    if scale == 0.0:  # row i sees keys 0 .. i + 4 (bottom-right causal, 13 keys for 9 queries): lse = log(i + 5)
        keys = torch.arange(13)[None, :] <= torch.arange(9)[:, None] + 4
        torch.testing.assert_close(out[0, :, 0], (keys.double() / keys.sum(-1, keepdim=True)) @ v[0, :, 0],
                                   rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(lse[0, 0], torch.log(torch.arange(5, 14, dtype=torch.float64)), rtol=1e-12,
                                   atol=1e-12)


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


def test_attention_flops_count_headdim_v():
    """QK^T costs headdim and PV headdim_v (MLA-style 192 / 128, bench.py's and bwd_prepost_ab.py's headdim_v): a
    count that ignored headdim_v gave 2 * 64 * 128 = 16384 for the first call here, not 2 * 64 * (64 + 32) = 12288,
    and every TFLOP/s of those scripts was off by as much."""
    assert attention_flops(1, 1, 8, 8, 64, headdim_v=32) == 2 * 8 * 8 * (64 + 32)
    assert attention_flops(2, 3, 16, 16, 192, headdim_v=128, causal=True) == 2 * 2 * 3 * 16 * 16 * (192 + 128) / 2
    # window (2, 0) at 8 x 8: row i sees min(i + 1, 3) keys, 1 + 2 + 3 * 6 = 21 pairs
    assert attention_flops(1, 1, 8, 8, 64, headdim_v=32, window=(2, 0)) == 2 * 21 * (64 + 32)


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


def test_error_ratio_rule_fails_on_one_bad_element():
    """The rule bounds the largest error, not a typical one: one mis-masked row among correct ones must fail. Here a
    single element 0.5 off among 1000 exact ones, against a largest pt error of ~3.4e-3: the max error (0.5) is 74
    times the bound (~6.7e-3), the mean error (5e-4) under it, so a rule on the mean error passed it (the uniform
    shifts of test_error_ratio_rule_can_fail cannot tell mean from max)."""
    ref = torch.randn(1000, dtype=torch.float64)
    pt = ref + 1e-3 * torch.randn_like(ref)
    one_off = ref.clone()
    one_off[17] += 0.5
    passed, report = error_ratio_report(one_off, ref, pt)
    assert not passed and "max err 5.000e-01" in report, report


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
