"""Output comparison: tolerances, nested outputs, NaNs, integers."""

from __future__ import annotations

import torch

from cuda_agent.evaluation.verify import Tolerance, compare_outputs


TOL = Tolerance()


def test_comparison_accepts_within_tolerance_and_names_shape_and_dtype_problems():
    ref = torch.randn(8, 8)
    assert compare_outputs(ref, ref + 5e-3, TOL).ok
    bad = compare_outputs(ref, ref + 0.5, TOL)
    assert not bad.ok and "64/64 elements outside" in bad.message
    shape = compare_outputs(ref, torch.randn(8, 4), TOL)
    assert not shape.ok and "shape mismatch" in shape.message and "(8, 4)" in shape.message
    dtype = compare_outputs(ref, ref.double(), TOL)
    assert not dtype.ok and "dtype mismatch" in dtype.message and "float64" in dtype.message


def test_comparison_of_nested_outputs_names_the_failing_leaf():
    ref = {"logits": torch.randn(4), "aux": (torch.ones(2), torch.zeros(3))}
    cand = {"logits": ref["logits"].clone(), "aux": (torch.ones(2), torch.ones(3))}
    res = compare_outputs(ref, cand, TOL)
    assert not res.ok and "output['aux'][1]" in res.message
    assert not compare_outputs((torch.ones(2),), [torch.ones(2), torch.ones(2)], TOL).ok


def test_nan_where_the_reference_is_finite_fails_but_matching_nans_pass():
    ref = torch.tensor([1.0, float("nan"), 3.0])
    assert compare_outputs(ref, torch.tensor([1.0, float("nan"), 3.0]), TOL).ok
    res = compare_outputs(ref, torch.tensor([float("nan"), float("nan"), 3.0]), TOL)
    assert not res.ok and "NaN/Inf" in res.message
    assert not compare_outputs(torch.ones(2), torch.tensor([1.0, float("inf")]), TOL).ok


def test_integer_outputs_must_match_exactly_and_tolerance_is_configurable():
    assert not compare_outputs(torch.arange(4), torch.arange(4) + 1, TOL).ok
    ref = torch.ones(4)
    assert not compare_outputs(ref, ref + 1e-3, Tolerance(atol=1e-4, rtol=1e-4)).ok
    assert compare_outputs(ref, ref + 1e-3, Tolerance(atol=1e-2, rtol=1e-2)).ok


def test_complex_outputs_are_compared_part_by_part():
    """Red team round 15 (h5): an in-place abs of a complex difference raised, and every
    candidate of a task with a complex output got "infrastructure"."""
    ref = torch.randn(64, 32, dtype=torch.complex64)
    assert compare_outputs(ref, ref.clone(), Tolerance()).ok
    assert not compare_outputs(ref, ref.conj().resolve_conj(), Tolerance()).ok
