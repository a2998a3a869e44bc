"""The native softcap kernels' polynomial tanh (kernels/hopper/softmax.cuh, tanh_poly): the coefficients compiled into
the kernels, evaluated as the kernels do (float32 Horner steps with one rounding per FFMA), against float64 tanh on the
whole range the kernels use them for; and scripts/tanh_poly_fit.py, which derived them, still derives them."""

import re
from pathlib import Path

import numpy as np
from script_module import load_script

SOFTMAX = Path(__file__).resolve().parents[1] / "kernels" / "hopper" / "softmax.cuh"


def kernel_polynomial() -> tuple[float, np.ndarray]:
    """(kTanhPolyBound, Q's float32 coefficients lowest first) as written in softmax.cuh."""
    text = SOFTMAX.read_text()
    bound = float(re.search(r"constexpr float kTanhPolyBound = ([0-9.e+-]+)f;", text).group(1))
    body = re.search(r"float tanh_poly\(float x\) \{(.*?)\n\}", text, re.S).group(1)
    literals = [float(c) for c in re.findall(r"([-0-9.]+e[-+][0-9]+)f", body)]  # Horner order: highest first
    return bound, np.array(literals[::-1], dtype=np.float32)


def test_kernel_tanh_poly_is_accurate_on_its_whole_range():
    fit = load_script("tanh_poly_fit")
    bound, coeffs = kernel_polynomial()
    assert bound == 1.0 and len(coeffs) == 7  # degree 6 in x^2
    xs = np.linspace(-bound, bound, 400_001).astype(np.float32)
    exact = np.tanh(xs.astype(np.float64))
    got = fit.horner_f32(coeffs, xs).astype(np.float64)
    err = np.abs(got - exact)
    # 1.2e-7 measured (softmax.cuh's comment); softcap_tanh's EX2 + RCP formula, which it replaces, a few 1e-7.
    assert err.max() < 1.5e-7, err.max()
    nonzero = np.abs(exact) > 0
    assert (err[nonzero] / np.abs(exact[nonzero])).max() < 2e-7
    assert got[xs == 0].tolist() == [0.0] and np.all(np.sign(got) == np.sign(xs))  # odd, exact at 0


def test_fit_script_derives_the_kernel_coefficients():
    fit = load_script("tanh_poly_fit")
    bound, coeffs = kernel_polynomial()
    derived = fit.fit(bound, len(coeffs) - 1).astype(np.float32)
    # lstsq on another BLAS may land an ulp or two away; the kernels' literals are this fit's float32 rounding
    np.testing.assert_allclose(derived, coeffs, rtol=1e-5, atol=1e-9)
