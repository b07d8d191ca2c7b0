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


def _full_walk(monkeypatch, ref, cand, tol):
    """The comparison with the one-sync path turned off: every slab through the full walk."""
    import cuda_agent.evaluation.verify as verify

    with monkeypatch.context() as m:
        m.setattr(verify, "_finite_slab", lambda *a: None)
        return compare_outputs(ref, cand, tol)


def test_the_one_sync_path_gives_the_full_walks_verdict_message_and_numbers(monkeypatch) -> None:
    """Issue 23: the comparison's quick path (three reads, one sync) must never decide otherwise
    than the full walk: within, at and past the tolerance, NaN and Inf on either side, fp32 values
    whose difference overflows, half types, float64, several slabs, tiny outputs near the norm floor."""
    import cuda_agent.evaluation.verify as verify

    monkeypatch.setattr(verify, "CHUNK_ELEMENTS", 1000)  # several slabs, on a CPU
    g = torch.Generator().manual_seed(7)
    ref = torch.randn(50, 70, generator=g)
    cases = {
        "same": ref.clone(),
        "noise": ref + 1e-3 * torch.randn(50, 70, generator=g),
        "under atol": ref + 0.009,
        "past atol, within rtol": ref + 0.009 + 0.005 * ref.abs(),
        "a few out": ref.clone().index_put_((torch.tensor([3, 40]), torch.tensor([5, 60])), torch.tensor([9.0, -9.0])),
        "all out": ref + 0.5,
        "nan": ref.clone().index_put_((torch.tensor([1]), torch.tensor([2])), torch.tensor(float("nan"))),
        "inf": ref.clone().index_put_((torch.tensor([49]), torch.tensor([69])), torch.tensor(float("inf"))),
        "tiny and wrong": ref * 1e-7,
    }
    tol = Tolerance()
    for name, cand in cases.items():
        got, want = compare_outputs(ref, cand, tol), _full_walk(monkeypatch, ref, cand, tol)
        assert (got.ok, got.message, got.max_abs_diff) == (want.ok, want.message, want.max_abs_diff), name
    both_inf = ref.clone()
    both_inf[0, 0] = float("inf")
    for cand in (both_inf.clone(), ref):  # the same non-finite value; and one the candidate lacks
        got, want = compare_outputs(both_inf, cand, tol), _full_walk(monkeypatch, both_inf, cand, tol)
        assert (got.ok, got.message) == (want.ok, want.message)
    huge = torch.full((30,), 3e38)
    got, want = compare_outputs(huge, -huge, tol), _full_walk(monkeypatch, huge, -huge, tol)  # c - r overflows
    assert (got.ok, got.message) == (want.ok, want.message) and not got.ok
    for dtype in (torch.float16, torch.bfloat16, torch.float64):
        r, c = ref.to(dtype), (ref + 0.02 * torch.randn(50, 70, generator=g)).to(dtype)
        got, want = compare_outputs(r, c, tol), _full_walk(monkeypatch, r, c, tol)
        assert (got.ok, got.message, got.max_abs_diff) == (want.ok, want.message, want.max_abs_diff), dtype
    small = torch.full((100,), 1e-6)
    got, want = compare_outputs(small, small * 3, tol), _full_walk(monkeypatch, small, small * 3, tol)
    assert (got.ok, got.message) == (want.ok, want.message)


def test_a_negative_tolerance_takes_the_full_walk(monkeypatch) -> None:
    """A review of the sixteenth session (V1): with rtol < 0 the quick path's "nothing past atol can
    fail" does not hold; such a tolerance gets the full walk's verdict."""
    ref = torch.tensor([1.0, -2.0, 3.0, -4.0])
    tol = Tolerance(atol=0.01, rtol=-0.5)
    got, want = compare_outputs(ref, ref + 0.005, tol), _full_walk(monkeypatch, ref, ref + 0.005, tol)
    assert (got.ok, got.message) == (want.ok, want.message) and not got.ok


def test_a_float64_output_past_1e154_is_compared_not_crashed_on() -> None:
    """Red team round 27: the norms were squared as Python floats, and a float64 norm over ~1.3e154
    raised OverflowError: "infrastructure" for a wrong 1e200 and for any honest task whose own
    output is that large. Norms are now summed as norms (math.hypot)."""
    ref = torch.tensor(3.0, dtype=torch.float64)
    bad = compare_outputs(ref, torch.tensor(1e200, dtype=torch.float64), TOL)
    assert not bad.ok and "elements outside" in bad.message
    huge = torch.full((4,), 1e200, dtype=torch.float64)
    assert compare_outputs(huge, huge.clone(), TOL).ok
    assert not compare_outputs(huge, huge * 1.5, TOL).ok
