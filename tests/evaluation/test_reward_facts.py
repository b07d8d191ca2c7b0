"""Issue 23's rules, pinned on the CPU: one statistic for the label and the numbers, the baselines
timed alone, slab-wise comparison, the judge's typed protocol, and output fingerprints."""

from __future__ import annotations

import math

import pytest
import torch

from cuda_agent.evaluation import EvalConfig
from cuda_agent.evaluation.records import EvalResult


def _finish(samples: dict, solo: dict | None = None):
    from cuda_agent.evaluation.evaluator import _finish

    res = EvalResult(task="t", task_hash="h", backend="cpu")
    res.correct = True
    ratios = _finish(res, EvalConfig(), samples, solo or {}, None)
    return res, ratios


def test_the_printed_speedup_is_the_statistic_the_reward_reads() -> None:
    # two regimes: the medians taken apart say 5.5 / 5.2 = 1.058x, the paired per-round ratios
    # (0.9 and 0.95) say 1 / 0.925 = 1.081x; the number printed is the one the reward reads
    eager = [1.0] * 20 + [10.0] * 20
    cand = [0.9] * 20 + [9.5] * 20
    res, ratios = _finish({"eager": eager, "candidate": cand})
    assert res.speedup_vs_eager == pytest.approx(1 / 0.925)
    assert res.speedup_vs_eager != pytest.approx(5.5 / 5.2)
    lo, hi = res.speedup_interval["eager"]
    assert lo <= res.speedup_vs_eager <= hi
    assert ("faster" in res.reason and "not faster" not in res.reason) == res.faster_than_eager


@pytest.mark.parametrize("beside,credited", [(1.45, True), (1.55, True), (1.7, False), (3.0, False)])
def test_a_baseline_slowed_beside_the_candidate_gives_no_credit(beside: float, credited: bool) -> None:
    solo = [1.0] * 7
    eager = [beside] * 40
    cand = [0.5 * beside] * 40  # 2x faster than eager beside it, in every round
    res, _ = _finish({"eager": eager, "candidate": cand}, {"eager": solo})
    assert res.correct and res.faster_than_eager is credited
    assert res.reward == (2 if credited else 1)
    assert ("alone once the candidate's process was gone" in res.reason) is (not credited)


def test_without_solo_times_the_claim_stands_on_the_rounds() -> None:
    res, _ = _finish({"eager": [2.0] * 40, "candidate": [1.0] * 40})
    assert res.reward == 2 and res.speedup_vs_eager == pytest.approx(2.0)


def test_compile_slowed_beside_the_candidate_withholds_only_that_claim() -> None:
    res, _ = _finish({"eager": [2.0] * 40, "compile": [4.0] * 40, "candidate": [1.0] * 40},
                     {"eager": [2.0] * 7, "compile": [1.5] * 7})
    assert res.faster_than_eager and not res.faster_than_compile and res.reward == 2
    assert "torch.compile took" in res.reason


def test_the_cache_is_filled_from_solo_times_only() -> None:
    from cuda_agent.evaluation.judge import baseline_to_cache

    stored = baseline_to_cache({"eager": [1.0, 1.1, 0.9], "compile": [0.5, 0.6, 0.4]}, True)
    assert stored.eager.median == pytest.approx(1.0) and stored.compile.median == pytest.approx(0.5)
    assert baseline_to_cache({"eager": [1.0], "compile": [0.5]}, False) is None


# ---- slab-wise comparison: the same verdicts, bounded temporaries ----------------------------
def _cases():
    r = torch.randn(64, 33)
    nan = r.clone()
    nan[3, 4] = float("nan")
    inf_ref = r.clone()
    inf_ref[1, 1] = float("inf")
    inf_wrong = inf_ref.clone()
    inf_wrong[1, 1] = 0.0
    ints = torch.arange(100)
    ints_wrong = ints.clone()
    ints_wrong[5] = 0
    tiny = torch.full((64, 33), 1 / (64 * 33))
    return [(r, r + 1e-4), (r, r + 0.5), (r, nan), (inf_ref, inf_ref.clone()), (inf_ref, inf_wrong),
            (r.t(), (r + 1e-3).t()), (tiny, tiny * 1.5), (ints, ints.clone()), (ints, ints_wrong),
            (r.half(), (r + 1e-3).half())]


def test_slab_wise_comparison_gives_the_same_verdicts(monkeypatch) -> None:
    from cuda_agent.evaluation import verify

    tol = verify.tolerance_for("paper", None, None, None, 1e-2, 1e-2)
    cases = _cases()  # one draw for both ways
    whole = [verify.compare_outputs(a, b, tol) for a, b in cases]
    monkeypatch.setattr(verify, "CHUNK_ELEMENTS", 7)
    slabs = [verify.compare_outputs(a, b, tol) for a, b in cases]
    assert [c.ok for c in whole] == [c.ok for c in slabs] == [True, False, False, True, False, True, False, True,
                                                              False, True]
    for a, b in zip(whole, slabs):
        if a.max_abs_diff is not None:
            assert b.max_abs_diff == pytest.approx(a.max_abs_diff)
    assert whole[2].message.split(":")[1] == slabs[2].message.split(":")[1]  # the same count of NaNs


def test_inputs_changed_is_slab_wise_too(monkeypatch) -> None:
    from cuda_agent.evaluation import guards, verify

    x = torch.randn(50, 9)
    y = x.clone()
    y[49, 8] += 1
    monkeypatch.setattr(verify, "CHUNK_ELEMENTS", 5)
    assert guards.inputs_changed([x], [x.clone()]) is None
    assert guards.inputs_changed([x], [y]) == "argument 0"
    assert guards.inputs_changed([x], [x.reshape(9, 50)]) == "argument 0"


# ---- the judge's own pieces ------------------------------------------------------------------
def test_fingerprints_tell_equal_outputs_from_changed_ones() -> None:
    from cuda_agent.evaluation.judge import _fingerprint

    a = torch.randn(300, 301)
    b = a.clone()
    b[7, 9] = b[7, 9] + 1e-3
    assert _fingerprint(a) == _fingerprint(a.clone())
    assert _fingerprint(a) != _fingerprint(b)
    assert _fingerprint((a, {"k": a[:2]})) == _fingerprint((a.clone(), {"k": a[:2].clone()}))
    assert _fingerprint(a.half()) != _fingerprint(a)  # dtype is part of it
    odd = torch.ones(3, dtype=torch.uint8)  # a byte count not divisible by 4
    assert _fingerprint(odd) == _fingerprint(odd.clone()) != _fingerprint(torch.zeros(3, dtype=torch.uint8))


def test_the_judge_protocol_round_trips_as_typed_records() -> None:
    from cuda_agent.evaluation.protocol import JudgeAnswer, JudgeRequest

    req = JudgeRequest(config=EvalConfig(backend="cpu"), task_source="x = 1", task_hash="h", workspace="/w")
    again = JudgeRequest.model_validate_json(req.model_dump_json())
    assert again == req and again.config.rules == "paper"
    ans = JudgeAnswer(correct=True, samples={"eager": [1.0], "candidate": [0.5]}, solo={"eager": [1.0]})
    assert JudgeAnswer.model_validate_json(ans.model_dump_json()) == ans
    with pytest.raises(ValueError):
        JudgeRequest.model_validate({"task_source": "x"})  # a malformed request is refused where it arrives


def test_the_slowed_beside_bound_sits_above_what_honest_code_measured() -> None:
    from cuda_agent.evaluation.evaluator import SLOWED_BESIDE

    assert 1.45 < SLOWED_BESIDE < 2.0 and math.isfinite(SLOWED_BESIDE)


@pytest.mark.parametrize("speedup,noise", [(1.0, 0.02), (1.04, 0.02), (1.06, 0.005), (1.3, 0.1), (2.0, 0.02), (0.7, 0.05)])
def test_the_solo_baselines_are_measured_whenever_the_reward_could_credit_speed(speedup: float, noise: float) -> None:
    """The judge times the baselines alone only where `_needs_solo` says the rounds could credit
    the candidate as faster than eager; the reward must then never credit speed without them."""
    import random

    from cuda_agent.evaluation.judge import _needs_solo

    rng = random.Random(int(speedup * 100))
    eager = [1.0 + rng.uniform(-noise, noise) for _ in range(40)]
    samples = {"eager": eager, "candidate": [e / speedup * (1 + rng.uniform(-noise, noise)) for e in eager]}
    res, _ = _finish(samples)
    assert _needs_solo(samples, EvalConfig()) == res.faster_than_eager


def test_inputs_changed_reads_nan_and_rounding_as_before() -> None:
    """torch.equal first (one pass), allclose only where it says no: NaN left in place and a change
    under 1e-5 are still no change; a real write still is one, in every dtype."""
    from cuda_agent.evaluation import guards

    x = torch.randn(64)
    x[3] = float("nan")
    assert guards.inputs_changed([x], [x.clone()]) is None
    assert guards.inputs_changed([x], [x + 1e-7]) is None
    y = x.clone()
    y[10] += 1.0
    assert guards.inputs_changed([x], [y]) == "argument 0"
    i = torch.arange(10)
    assert guards.inputs_changed([i], [i.clone()]) is None
    assert guards.inputs_changed([i], [i + (i == 4)]) == "argument 0"
