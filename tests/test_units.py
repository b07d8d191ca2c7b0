"""Fast unit tests: the channel, output comparison, the decision rule and the reward."""

from __future__ import annotations

import os
import random

import pytest
import torch

from cuda_agent.isolation.channel import ChannelError, Reader, encode, send
from cuda_agent.evaluation.records import TimingStats
from cuda_agent.evaluation.reward import milestone_reward, speedup_score
from cuda_agent.evaluation.timing import clearly_faster, median_interval
from cuda_agent.evaluation.verify import Tolerance, compare_outputs

TOL = Tolerance()


def _roundtrip(message: dict) -> dict:
    r, w = os.pipe()
    try:
        send(w, message)
        return Reader(r).receive(deadline=1e18)
    finally:
        os.close(r)
        os.close(w)


def test_channel_roundtrips_nested_outputs_of_every_dtype():
    out = (torch.randn(3, 4), {"a": torch.arange(5), "b": [torch.ones(2, dtype=torch.bfloat16), 3]},
           torch.zeros(0), torch.tensor([True, False]), 1.5, None)
    got = _roundtrip({"type": "x", "output": out})["output"]
    assert isinstance(got, tuple) and len(got) == len(out)
    assert torch.equal(got[0], out[0]) and got[1]["b"][0].dtype == torch.bfloat16
    assert torch.equal(got[1]["a"], out[1]["a"]) and got[1]["b"][1] == 3
    assert got[2].shape == (0,) and got[3].dtype == torch.bool and got[4] == 1.5 and got[5] is None


def test_channel_rejects_a_tensor_whose_bytes_do_not_match_its_shape():
    parts = encode({"type": "x", "output": torch.ones(4)})
    frame = b"".join(bytes(p) for p in parts).replace(b'"shape": [4]', b'"shape": [5]')
    r, w = os.pipe()
    os.write(w, frame)
    with pytest.raises(ChannelError):
        Reader(r).receive(deadline=1e18)
    os.close(r)
    os.close(w)


def test_channel_never_unpickles_objects():
    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    got = _roundtrip({"type": "x", "output": Evil()})["output"]
    assert isinstance(got, str) and "Evil" in got


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


def test_reward_levels():
    assert milestone_reward(False, True, True) == -1
    assert milestone_reward(True, False, False) == 1
    assert milestone_reward(True, True, False) == 2
    assert milestone_reward(True, True, True) == 3
    assert speedup_score(False, 3.0) == -5.0 and speedup_score(True, 2.0) == pytest.approx(1.0)


def test_median_interval_covers_the_median():
    xs = list(range(1, 102))
    lo, hi = median_interval(xs, 0.99)
    assert lo < 51 < hi and hi - lo < 30


def test_decision_rule_ignores_noise_and_sees_real_speedups():
    rng = random.Random(0)
    false_calls = 0
    for _ in range(500):  # identical code: per-round ratios around 1 with 3% noise and outliers
        ratios = [rng.gauss(1.0, 0.03) * (1.3 if rng.random() < 0.05 else 1.0) for _ in range(100)]
        false_calls += clearly_faster(ratios, 0.05, 0.99)
    assert false_calls == 0
    assert clearly_faster([rng.gauss(0.85, 0.03) for _ in range(100)], 0.05, 0.99)
    # a tie at the margin is not "more than 5% faster"
    assert not clearly_faster([rng.gauss(0.95, 0.01) for _ in range(100)], 0.05, 0.99)


def test_timing_stats():
    s = TimingStats.of([3.0, 1.0, 2.0, 4.0])
    assert s.median == 2.5 and s.min == 1.0 and s.max == 4.0 and s.trials == 4


def test_starter_renames_every_reference_to_the_class():
    from cuda_agent.languages.base import starter_model_new as _starter_model_new

    src = ("import torch.nn as nn\nclass Model(nn.Module):\n    def __init__(self):\n"
           "        super(Model, self).__init__()\n    def forward(self, x):\n        return x\n")
    ns: dict = {}
    exec(_starter_model_new(src, "cpu_extension"), ns)
    assert "Model" not in ns and ns["ModelNew"]()(3) == 3
