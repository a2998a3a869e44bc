"""FlashAttention-3's error-ratio rule, defined once; every kernel test in fa3nn goes through it.

Compute two references from one implementation: `ref` in high precision (fp32, or fp64 for fp32 inputs) and `pt` in
the tested precision. The tested tensor passes when

    max|actual - ref| <= ratio * max|pt - ref| + noise,   ratio = 2,

where noise is twice the rounding error of one add at the tested dtype: 2 * max|fl(r + 0.3) - (r + 0.3)| over the
reference values r, with fl rounding to that dtype: about one ulp at the tensor's largest magnitude (for values below
0.2: 1.6e-3 in bf16, 9.8e-5 in fp16, 2.4e-8 in fp32). It keeps a tensor whose exact value is 0 (a gradient that
cancels) from demanding an exact 0 from arithmetic that rounds. A kernel may be at most twice as far from the
truth as plain PyTorch at its own precision. NaN/Inf must appear exactly where the reference has them
(propagation, never invention).
"""

from __future__ import annotations

import numbers

import torch

DEFAULT_RATIO = 2.0


def rounding_noise(ref: torch.Tensor, dtype: torch.dtype) -> float:
    shifted = ref[torch.isfinite(ref)].to(torch.float64) + 0.3
    if shifted.numel() == 0:
        return 0.0
    return 2.0 * (shifted.to(dtype).to(torch.float64) - shifted).abs().max().item()


def _check_floating(**tensors) -> None:
    """The rule measures rounding: integer or bool tensors have none to measure (their noise came out as the
    rounding of r + 0.3 and passed off-by-one values), and complex ones would lose their imaginary parts."""
    for name, tensor in tensors.items():
        if not isinstance(tensor, torch.Tensor) or not tensor.is_floating_point():
            got = tensor.dtype if isinstance(tensor, torch.Tensor) else type(tensor).__name__
            raise TypeError(f"{name} must be a floating-point torch.Tensor (the error-ratio rule bounds rounding), got "
                            f"{got}; compare integer or bool results with torch.equal")


def error_ratio_report(actual, ref, pt, ratio: float = DEFAULT_RATIO) -> tuple[bool, str]:
    """(passed, one-line report with the numbers) for the rule above; actual, ref and pt floating-point tensors,
    ratio a finite number >= 0 (NaN made every bound NaN, failing every tensor; a negative one can put the bound below
    0)."""
    _check_floating(actual=actual, ref=ref, pt=pt)
    if isinstance(ratio, bool) or not isinstance(ratio, numbers.Real) or not 0 <= ratio < float("inf"):
        raise ValueError(f"ratio must be a finite number >= 0 (FlashAttention-3's rule: {DEFAULT_RATIO}), "
                         f"got {ratio!r}")
    if actual.shape != ref.shape or pt.shape != ref.shape:
        return False, f"shape mismatch: actual {tuple(actual.shape)}, ref {tuple(ref.shape)}, pt {tuple(pt.shape)}"
    wide = torch.float64
    actual_w, ref_w, pt_w = actual.to(wide), ref.to(wide), pt.to(wide)
    special_ref = ~torch.isfinite(ref_w)
    mismatched = (special_ref != ~torch.isfinite(actual_w)) | (
        special_ref & ~(actual_w.isnan() & ref_w.isnan()) & (actual_w != ref_w)
    )
    if mismatched.any():
        where = mismatched.nonzero()[0].tolist()
        return False, (
            f"non-finite values differ from the reference at {int(mismatched.sum())} places, first at {where}: "
            f"actual {actual_w[tuple(where)].item()}, ref {ref_w[tuple(where)].item()}"
        )
    finite = ~special_ref
    err = (actual_w - ref_w)[finite].abs().max().item() if finite.any() else 0.0
    pt_finite = finite & torch.isfinite(pt_w)
    base = (pt_w - ref_w)[pt_finite].abs().max().item() if pt_finite.any() else 0.0
    noise = rounding_noise(ref, actual.dtype)
    bound = ratio * base + noise
    report = f"max err {err:.3e} vs bound {bound:.3e} (= {ratio} x pt err {base:.3e} + noise {noise:.3e})"
    return err <= bound, report


def assert_error_ratio(actual, ref, pt, name: str = "out", ratio: float = DEFAULT_RATIO) -> None:
    """Assert the error-ratio rule; the message names the tensor and gives every number."""
    passed, report = error_ratio_report(actual, ref, pt, ratio)
    assert passed, f"{name}: {report}"
