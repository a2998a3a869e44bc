"""scripts/bench_fp8.py's row names: `-fp8` rows run the default FP8 recipe, `-fp8-fast` rows the same recipe with
fast_exp2, both on the backend the name starts with; the CPU check runs the emulation through the same path."""

from __future__ import annotations

import torch
from script_module import load_script


def test_row_names_pick_backend_and_recipe():
    rows = load_script("bench_fp8")
    assert rows.fp8_base("hopper-fp8-fast") == "hopper" and rows.fp8_base("triton-fp8") == "triton"
    assert rows.fp8_base("cudnn") is None and rows.fp8_base("hopper") is None
    assert rows.recipe_of("hopper-fp8-fast").fast_exp2 and not rows.recipe_of("hopper-fp8").fast_exp2
    assert rows.recipe_of("hopper-fp8-fast").incoherent  # otherwise the default recipe


def test_fast_row_checks_against_its_own_emulation():
    """The check before timing compares a -fp8-fast row with the emulation under fast_exp2 (d128, 300 keys: the
    256-key kernel's linear exp2): the reference backend's own row passes it exactly (drift 0)."""
    rows = load_script("bench_fp8")
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 300, 2, 128).to(torch.bfloat16) for _ in range(3))
    result = rows.check("reference-fp8-fast", q, k, v, causal=True)
    assert result["ok"] and result["drift_vs_fp8_error"] == 0.0
