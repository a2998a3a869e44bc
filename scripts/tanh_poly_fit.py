"""Coefficients of the softcap kernels' polynomial tanh (kernels/hopper/softmax.cuh, tanh_poly): tanh(x) = x Q(x^2)
on |x| <= BOUND, Q of degree DEGREE in z = x^2, fitted for relative error by Lawson's iteration (weighted least squares
converging to the minimax fit) on Chebyshev nodes, rounded to float32, then checked on 2M points of [-BOUND, BOUND] in
float32 Horner steps with fused multiply-adds (each step's a * z + c rounded once, as FFMA does).

    python scripts/tanh_poly_fit.py [--bound 1.0] [--degree 6]

Prints the coefficients as C literals (highest first, the Horner order) and the max absolute / relative error.
"""

from __future__ import annotations

import argparse

import numpy as np


def fit(bound: float, degree: int, nodes: int = 4000, iterations: int = 200) -> np.ndarray:
    """Q's coefficients, lowest first, minimising max |x Q(x^2) / tanh(x) - 1| on (0, bound]."""
    z = bound * bound * 0.5 * (1.0 - np.cos(np.pi * (np.arange(nodes) + 0.5) / nodes))
    x = np.sqrt(z)
    q = np.tanh(x) / x
    a = np.vander(z, degree + 1, increasing=True) / q[:, None]  # rows scaled: residuals are relative errors
    weights = np.full(nodes, 1.0 / nodes)
    for _ in range(iterations):
        sw = np.sqrt(weights)
        coeffs, *_ = np.linalg.lstsq(a * sw[:, None], sw, rcond=None)
        residual = np.abs(a @ coeffs - 1.0)
        weights = weights * residual
        weights /= weights.sum()
    return coeffs


def horner_f32(coeffs32: np.ndarray, x: np.ndarray) -> np.ndarray:
    """x Q(x^2) in float32 with one rounding per FFMA (products of float32s are exact in float64)."""
    x = x.astype(np.float32)
    z = (x * x).astype(np.float32)
    acc = np.full_like(z, coeffs32[-1])
    for c in coeffs32[-2::-1]:
        acc = (acc.astype(np.float64) * z + np.float64(c)).astype(np.float32)
    return (x * acc).astype(np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bound", type=float, default=1.0)
    parser.add_argument("--degree", type=int, default=6)
    args = parser.parse_args()
    coeffs32 = fit(args.bound, args.degree).astype(np.float32)
    xs = np.linspace(-args.bound, args.bound, 2_000_001).astype(np.float32)
    exact = np.tanh(xs.astype(np.float64))
    err = np.abs(horner_f32(coeffs32, xs).astype(np.float64) - exact)
    nonzero = exact != 0
    print("Q (highest first):", ", ".join(f"{float(c):.9e}f" for c in coeffs32[::-1]))
    print(f"bound {args.bound} degree {args.degree}: max abs error {err.max():.3e}, "
          f"max rel error {(err[nonzero] / np.abs(exact[nonzero])).max():.3e}")


if __name__ == "__main__":
    main()
