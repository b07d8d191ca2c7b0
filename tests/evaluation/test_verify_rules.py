"""Every comparison rule of `verify`, pinned at its boundary: non-finite values each way,
shapes (broadcastable ones included), dtypes, the elementwise bound, the scale-aware norm
check on its own (and its floor), exact integers, and the tolerance profiles."""

from __future__ import annotations

import math

import pytest
import torch

from cuda_agent.evaluation.verify import KERNELBENCH_TOLERANCE, Tolerance, compare_outputs, tolerance_for

TOL = Tolerance()
NAN, INF = float("nan"), float("inf")


def _t(*xs: float) -> torch.Tensor:
    return torch.tensor(xs, dtype=torch.float32)


# ---- non-finite values, each way -------------------------------------------------------------
@pytest.mark.parametrize("ref,cand,ok", [
    ((1, 1, 1, 1), (1, NAN, 1, 1), False),      # NaN where the reference is finite
    ((1, 1, 1, 1), (1, INF, 1, 1), False),      # +Inf where the reference is finite
    ((1, 1, 1, 1), (1, -INF, 1, 1), False),
    ((1, NAN, 1, 1), (1, 1, 1, 1), False),      # a finite value where the reference is NaN
    ((1, INF, 1, 1), (1, 1e30, 1, 1), False),   # ... where it is +Inf
    ((1, INF, 1, 1), (1, -INF, 1, 1), False),   # Inf of the other sign
    ((1, INF, 1, 1), (1, NAN, 1, 1), False),    # NaN for Inf
    ((1, NAN, 1, 1), (1, INF, 1, 1), False),    # Inf for NaN
    ((1, NAN, 1, 1), (1, NAN, 1, 1), True),     # the same non-finite values: fine
    ((1, INF, -INF, 1), (1, INF, -INF, 1), True),
    ((1, NAN, 1, 1), (1, NAN, 1, 2), False),    # the finite part is still compared
])
def test_non_finite_values(ref: tuple, cand: tuple, ok: bool) -> None:
    res = compare_outputs(_t(*ref), _t(*cand), TOL)
    assert res.ok is ok, res.message


def test_nan_where_the_reference_is_finite_is_named() -> None:
    res = compare_outputs(torch.ones(4), _t(1, NAN, 1, 1), TOL)
    assert not res.ok and "1 NaN/Inf value(s) where the reference is finite" in res.message
    res = compare_outputs(_t(1, NAN), _t(1, 1), TOL)
    assert not res.ok and "non-finite values differ" in res.message


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_nan_is_caught_in_every_floating_dtype(dtype: torch.dtype) -> None:
    ref = torch.ones(8, dtype=dtype)
    cand = ref.clone()
    cand[3] = NAN
    assert not compare_outputs(ref, cand, TOL).ok
    assert compare_outputs(cand, cand.clone(), TOL).ok


# ---- shapes and dtypes ----------------------------------------------------------------------
@pytest.mark.parametrize("ref_shape,cand_shape", [
    ((8, 8), (1, 8)),   # broadcastable to the reference
    ((8, 8), (8, 1)),
    ((8, 8), (8,)),
    ((8, 8), ()),       # a scalar broadcasts to anything
    ((1, 8), (8, 8)),   # the reference broadcasts to the candidate
    ((8,), (1, 8)),     # the same numel, one more dimension
    ((8, 8), (64,)),    # the same numel, flattened
    ((4, 8), (8, 4)),   # transposed
    ((8, 8), (8, 4)),   # not broadcastable
    ((0, 8), (0, 4)),   # empty, other shape
])
def test_any_other_shape_fails(ref_shape: tuple, cand_shape: tuple) -> None:
    ref = torch.ones(ref_shape)
    res = compare_outputs(ref, torch.ones(cand_shape), TOL)
    assert not res.ok and "shape mismatch" in res.message, res.message


@pytest.mark.parametrize("ref_dtype,cand_dtype", [
    (torch.float32, torch.float64), (torch.float32, torch.float16), (torch.float32, torch.bfloat16),
    (torch.float16, torch.bfloat16), (torch.int64, torch.int32), (torch.bool, torch.uint8),
    (torch.float32, torch.int32), (torch.int32, torch.float32),
])
def test_any_other_dtype_fails(ref_dtype: torch.dtype, cand_dtype: torch.dtype) -> None:
    ref = torch.ones(4, dtype=ref_dtype)
    res = compare_outputs(ref, torch.ones(4, dtype=cand_dtype), TOL)
    assert not res.ok and "dtype mismatch" in res.message, res.message


def test_empty_outputs_of_the_same_shape_match() -> None:
    assert compare_outputs(torch.ones(0, 3), torch.ones(0, 3), TOL).ok


def test_not_a_tensor_where_a_tensor_is_expected() -> None:
    assert not compare_outputs(torch.ones(2), [1.0, 1.0], TOL).ok
    assert not compare_outputs(torch.ones(2), None, TOL).ok


# ---- the elementwise bound |c - r| <= atol + rtol |r| -----------------------------------------
LOOSE_NORM = dict(rel_norm=10.0)  # the norm check out of the way: the elementwise rule alone


def test_elementwise_bound_is_inclusive_at_the_limit() -> None:
    tol = Tolerance(atol=0.25, rtol=0.25, **LOOSE_NORM)
    ref = torch.tensor([1.0, 2.0], dtype=torch.float64)
    # limit at r = 1: 0.25 + 0.25 = 0.5; at r = 2: 0.75 (all exact in binary)
    assert compare_outputs(ref, torch.tensor([1.5, 2.75], dtype=torch.float64), tol).ok
    assert compare_outputs(ref, torch.tensor([0.5, 1.25], dtype=torch.float64), tol).ok
    over = compare_outputs(ref, torch.tensor([1.5 + 2**-40, 2.0], dtype=torch.float64), tol)
    assert not over.ok and "1/2 elements outside atol=0.25 rtol=0.25" in over.message


def test_rtol_scales_with_the_reference_and_atol_does_not() -> None:
    ref = torch.tensor([100.0], dtype=torch.float64)
    assert compare_outputs(ref, ref + 0.9, Tolerance(atol=0.0, rtol=0.01, **LOOSE_NORM)).ok
    assert not compare_outputs(ref, ref + 1.1, Tolerance(atol=0.0, rtol=0.01, **LOOSE_NORM)).ok
    assert not compare_outputs(ref, ref + 0.9, Tolerance(atol=0.5, rtol=0.0, **LOOSE_NORM)).ok
    neg = torch.tensor([-100.0], dtype=torch.float64)  # |r|, not r
    assert compare_outputs(neg, neg + 0.9, Tolerance(atol=0.0, rtol=0.01, **LOOSE_NORM)).ok


def test_half_precision_is_compared_upcast() -> None:
    ref = torch.full((4,), 1000.0, dtype=torch.float16)
    cand = torch.full((4,), 1008.0, dtype=torch.float16)  # 8 apart: rtol 1e-2 allows 10.01
    assert compare_outputs(ref, cand, Tolerance(atol=0.01, rtol=0.01, **LOOSE_NORM)).ok
    cand = torch.full((4,), 1016.0, dtype=torch.float16)
    assert not compare_outputs(ref, cand, Tolerance(atol=0.01, rtol=0.01, **LOOSE_NORM)).ok


def test_max_abs_diff_is_reported() -> None:
    res = compare_outputs(torch.ones(3), _t(1.0, 0.996, 1.002), Tolerance(**LOOSE_NORM))
    assert res.ok and res.max_abs_diff == pytest.approx(0.004, rel=1e-3)


# ---- the scale-aware check, on its own ----------------------------------------------------------
def test_a_wrong_formula_with_tiny_outputs_fails_only_the_norm_check() -> None:
    # softmax over 16384 columns: uniform 1/N where the right answer is peaked; every element is
    # within atol = 1e-2, the whole output is 100% wrong
    n = 16384
    ref = torch.zeros(n)
    ref[:8] = 1 / 8
    cand = torch.full((n,), 1 / n)
    elementwise_only = compare_outputs(ref, cand, Tolerance(atol=0.2, rtol=0.0, rel_norm=10.0))
    assert elementwise_only.ok  # the elementwise rule alone lets it through
    res = compare_outputs(ref, cand, Tolerance(atol=0.2, rtol=0.0))
    assert not res.ok and "relative error" in res.message and "exceeds 0.01" in res.message


def test_norm_check_boundary() -> None:
    ref = torch.ones(100, dtype=torch.float64)  # ||r|| = 10
    tol = Tolerance(atol=1.0, rtol=0.0, rel_norm=0.01)
    just_in = ref + 0.0099  # ||d|| / ||r|| = 0.0099
    just_out = ref + 0.0101
    assert compare_outputs(ref, just_in, tol).ok
    res = compare_outputs(ref, just_out, tol)
    assert not res.ok and "relative error 0.0101" in res.message
    # one element carrying all the error: ||d|| = 0.11 -> 0.011 > 0.01
    spike = ref.clone()
    spike[0] += 0.11
    assert not compare_outputs(ref, spike, tol).ok
    spike[0] = 1.09
    assert compare_outputs(ref, spike, tol).ok


def test_norm_check_uses_max_of_atol_and_rtol_when_unset() -> None:
    ref = torch.ones(100, dtype=torch.float64)
    tol = Tolerance(atol=0.05, rtol=0.02, rel_norm=None)  # -> 0.05
    assert compare_outputs(ref, ref + 0.04, tol).ok
    tight = Tolerance(atol=0.05, rtol=0.02, rel_norm=0.01)
    assert not compare_outputs(ref, ref + 0.04, tight).ok


def test_norm_floor_keeps_rounding_noise_on_zero_outputs_out() -> None:
    # a reference that is ~0 by nature: its scale is floored at an RMS of 1e-5, so noise of
    # RMS 5e-8 (0.5% of the floor) passes and noise of RMS 2e-7 (2%) fails
    n = 10000
    ref = torch.zeros(n, dtype=torch.float64)
    assert compare_outputs(ref, torch.full((n,), 5e-8, dtype=torch.float64), TOL).ok
    res = compare_outputs(ref, torch.full((n,), 2e-7, dtype=torch.float64), TOL)
    assert not res.ok and "relative error" in res.message
    assert math.isclose(1e-5 * math.sqrt(n), 1e-3)


def test_norm_check_ignores_matching_non_finite_positions() -> None:
    ref = _t(NAN, 1.0, 1.0, 1.0)
    assert compare_outputs(ref, _t(NAN, 1.0, 1.0, 1.0), TOL).ok
    assert not compare_outputs(ref, _t(NAN, 1.0, 1.0, 1.5), TOL).ok


# ---- integers, bools, Python values, nesting ------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.uint8])
def test_integers_must_match_exactly(dtype: torch.dtype) -> None:
    ref = torch.arange(10, dtype=dtype)
    assert compare_outputs(ref, ref.clone(), Tolerance(atol=100.0, rtol=100.0)).ok
    cand = ref.clone()
    cand[5] += 1
    res = compare_outputs(ref, cand, Tolerance(atol=100.0, rtol=100.0))
    assert not res.ok and "1/10 elements differ" in res.message


def test_bools_must_match_exactly() -> None:
    ref = torch.tensor([True, False, True])
    assert compare_outputs(ref, ref.clone(), TOL).ok
    assert not compare_outputs(ref, torch.tensor([True, True, True]), TOL).ok


def test_python_values() -> None:
    assert compare_outputs(1.0, 1.005, TOL).ok and not compare_outputs(1.0, 1.03, TOL).ok
    assert compare_outputs(2.0, 2, TOL).ok
    assert not compare_outputs(1.0, True, TOL).ok  # a bool is not a number here
    assert compare_outputs(3, 3, TOL).ok and not compare_outputs(3, 4, TOL).ok
    assert not compare_outputs(3, 3.0, TOL).ok  # an int output must stay an int


def test_sequences_and_dicts_compare_every_leaf() -> None:
    ref = (torch.ones(2), [torch.zeros(2), torch.ones(3)])
    assert compare_outputs(ref, (torch.ones(2), [torch.zeros(2), torch.ones(3)]), TOL).ok
    res = compare_outputs(ref, (torch.ones(2), [torch.zeros(2), _t(1, 1, NAN)]), TOL)
    assert not res.ok and res.message.startswith("output[1][1]")
    assert not compare_outputs({"a": torch.ones(1)}, {"a": torch.ones(1), "b": torch.ones(1)}, TOL).ok
    assert not compare_outputs([torch.ones(1)], torch.ones(1), TOL).ok


# ---- tolerances --------------------------------------------------------------------------------
def test_integer_dtypes_get_zero_tolerance() -> None:
    tol = Tolerance(atol=0.5, rtol=0.5, per_dtype={torch.int64: (9.0, 9.0)})
    assert tol.for_dtype(torch.int64) == (0.0, 0.0)
    assert tol.for_dtype(torch.bool) == (0.0, 0.0)
    assert tol.for_dtype(torch.float32) == (0.5, 0.5)


def test_tolerance_profiles() -> None:
    paper = tolerance_for("paper", None, None, None, 1e-2, 1e-2)
    assert (paper.atol, paper.rtol, paper.rel_norm) == (1e-2, 1e-2, 1e-2)
    kb = tolerance_for("kernelbench", None, None, None, 1e-2, 1e-2)
    assert kb.for_dtype(torch.float32) == (1e-4, 1e-4) and kb.for_dtype(torch.float16) == (1e-2, 1e-2)
    assert kb.for_dtype(torch.bfloat16) == (1e-2, 1e-2) and kb.for_dtype(torch.float64) == (1e-4, 1e-4)
    assert KERNELBENCH_TOLERANCE[torch.float32] == 1e-4
    # the kernelbench profile's norm check follows the output's dtype
    ref = torch.ones(100)
    assert not compare_outputs(ref, ref + 5e-4, kb).ok
    assert compare_outputs(ref.half(), (ref + 5e-3).half(), kb).ok
    # a task's own tolerance wins over the profile; the other one falls back to the configured value
    own = tolerance_for("kernelbench", "fp16", 0.1, None, 1e-2, 1e-3)
    assert (own.atol, own.rtol, own.rel_norm) == (0.1, 1e-3, 0.1) and own.per_dtype is None
