"""The baseline cache's provenance: what a cached baseline is keyed on, that only the judge's
own eager and torch.compile samples are ever stored (never the candidate's), and how a cached
compile time is used (rescaled by how eager moved, clamped)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_agent.evaluation.baselines import Baseline, BaselineCache
from cuda_agent.evaluation.config import EvalConfig
from cuda_agent.evaluation.records import EvalResult, TimingStats

KEY_ARGS = dict(task_hash="t", device="H100", torch_version="2.9", compile_mode="default", backend="cuda",
                timing_fingerprint="{}", precision=None)


# ---- the key --------------------------------------------------------------------------------
@pytest.mark.parametrize("field,other", [
    ("task_hash", "t2"), ("device", "H200"), ("torch_version", "2.10"), ("compile_mode", "max-autotune"),
    ("compile_mode", None), ("backend", "cpu"), ("timing_fingerprint", '{"budget_s": 2}'), ("precision", "fp16"),
    ("precision", "bf16"),
])
def test_every_part_of_the_measurement_is_in_the_key(field: str, other: object) -> None:
    assert BaselineCache.key(**{**KEY_ARGS, field: other}) != BaselineCache.key(**KEY_ARGS)


def test_fp32_is_the_default_precision_of_the_key() -> None:
    assert BaselineCache.key(**{**KEY_ARGS, "precision": "fp32"}) == BaselineCache.key(**KEY_ARGS)
    assert BaselineCache.key(**{**KEY_ARGS, "precision": "fp16"}) != BaselineCache.key(**{**KEY_ARGS, "precision": "bf16"})


# ---- the store ------------------------------------------------------------------------------
def _stats(*xs: float) -> TimingStats:
    return TimingStats.of(list(xs))


def test_put_then_get_round_trips_and_leaves_no_temporary(tmp_path: Path) -> None:
    cache = BaselineCache(tmp_path)
    base = Baseline(eager=_stats(2.0, 2.1, 1.9), compile=_stats(1.0, 1.1))
    assert cache.get("k") is None
    cache.put("k", base)
    assert cache.get("k") == base
    assert [p.name for p in (tmp_path / "baselines").iterdir()] == ["k.json"]


def test_a_damaged_entry_is_a_miss(tmp_path: Path) -> None:
    cache = BaselineCache(tmp_path)
    (tmp_path / "baselines").mkdir()
    (tmp_path / "baselines" / "k.json").write_text('{"eager": {"median": 1.0')
    assert cache.get("k") is None
    (tmp_path / "baselines" / "k.json").write_text(json.dumps({"eager": {"median": "fast"}}))
    assert cache.get("k") is None


# ---- only the judge's samples are stored ----------------------------------------------------
EAGER, COMPILE, CANDIDATE = [4.0, 4.2, 3.8, 4.1], [2.0, 2.2, 1.8, 2.1], [0.5, 0.4, 0.6, 0.5]


def _store(tmp_path: Path, measured_compile: bool, solo: dict) -> Baseline | None:
    from cuda_agent.evaluation.judge import Judge
    from cuda_agent.evaluation.protocol import JudgeAnswer

    cache = BaselineCache(tmp_path)
    req = type("Req", (), {"baseline_key": "k"})()
    Judge._store_baseline(None, cache, req, JudgeAnswer(solo=solo), measured_compile)  # type: ignore[arg-type]
    return cache.get("k")


def test_the_stored_baseline_is_the_judges_solo_eager_and_compile_samples(tmp_path: Path) -> None:
    stored = _store(tmp_path, True, {"eager": EAGER, "compile": COMPILE, "candidate": CANDIDATE})
    assert stored is not None
    assert stored.eager == TimingStats.of(EAGER)
    assert stored.compile == TimingStats.of(COMPILE)  # never the candidate's times
    assert stored.compile.median != TimingStats.of(CANDIDATE).median


def test_nothing_is_stored_when_compile_was_not_measured_in_this_run(tmp_path: Path) -> None:
    # a cached baseline was used (compile not measured): re-storing it would copy it forward
    # with this run's eager and nobody's compile samples
    assert _store(tmp_path, False, {"eager": EAGER, "compile": COMPILE}) is None
    assert _store(tmp_path, True, {"eager": EAGER, "compile": []}) is None
    assert _store(tmp_path, True, {"eager": [], "compile": COMPILE}) is None
    assert _store(tmp_path, True, {"candidate": CANDIDATE}) is None


def test_no_cache_no_store() -> None:
    from cuda_agent.evaluation.judge import Judge
    from cuda_agent.evaluation.protocol import JudgeAnswer

    Judge._store_baseline(None, None, None, JudgeAnswer(solo={"eager": EAGER, "compile": COMPILE}), True)  # type: ignore[arg-type]


@pytest.mark.parametrize("mode,measure,cached,only,expected", [
    (None, True, None, False, False), (None, True, None, True, False),      # no mode: never
    ("default", True, None, False, True), ("default", False, None, False, False),
    ("default", True, "cached", False, False),                               # the cache stands in
    ("default", False, "cached", True, True), ("default", True, "cached", True, True)])
def test_when_the_judge_times_compile_itself(mode, measure, cached, only, expected) -> None:
    from cuda_agent.evaluation.judge import compile_to_measure

    assert compile_to_measure(mode, measure, cached, only) is expected


# ---- how a cached compile time is used ------------------------------------------------------
def _finish(samples: dict, compile_samples: list | None, cached: Baseline | None) -> tuple[EvalResult, tuple]:
    from cuda_agent.evaluation.evaluator import _finish

    res = EvalResult(task="t", task_hash="h", backend="cpu")
    res.correct = True
    ratios = _finish(res, EvalConfig(), {**samples, **({"compile": compile_samples} if compile_samples else {})}, {},
                     cached)
    return res, ratios


def test_a_cached_compile_time_is_rescaled_by_how_eager_moved() -> None:
    cand = [1.0] * 40
    cached = Baseline(eager=_stats(2.0, 2.0, 2.0), compile=_stats(1.5, 1.5, 1.5))
    res, ratios = _finish({"eager": [3.0] * 40, "candidate": cand}, None, cached)  # eager 1.5x slower now
    assert res.baseline_cached and res.compile_stats == cached.compile
    assert res.time_ms.compile == pytest.approx(2.25)
    assert ratios[1] == pytest.approx([1.0 / 2.25] * 40)
    assert res.reward == 3


@pytest.mark.parametrize("eager_now,expected_compile", [(100.0, 3.0), (0.1, 0.75), (2.0, 1.5)])
def test_the_drift_factor_is_clamped_to_half_and_double(eager_now: float, expected_compile: float) -> None:
    cached = Baseline(eager=_stats(2.0, 2.0, 2.0), compile=_stats(1.5, 1.5, 1.5))
    res, _ = _finish({"eager": [eager_now] * 20, "candidate": [1.0] * 20}, None, cached)
    assert res.time_ms.compile == pytest.approx(expected_compile)


def test_fresh_compile_samples_win_over_the_cache() -> None:
    cached = Baseline(eager=_stats(2.0, 2.0), compile=_stats(0.1, 0.1))  # a cache that says compile is fast
    res, ratios = _finish({"eager": [2.0] * 30, "candidate": [1.0] * 30}, [1.6] * 30, cached)
    assert not res.baseline_cached and res.time_ms.compile == pytest.approx(1.6)
    assert res.reward == 3 and ratios[1] == pytest.approx([1 / 1.6] * 30)


def test_without_compile_times_the_reward_stops_at_2() -> None:
    res, ratios = _finish({"eager": [2.0] * 30, "candidate": [1.0] * 30}, None, None)
    assert res.reward == 2 and res.time_ms.compile is None and ratios[1] == []
    res, _ = _finish({"eager": [2.0] * 30, "candidate": [1.0] * 30}, None, Baseline(eager=_stats(2.0, 2.0)))
    assert res.reward == 2 and not res.baseline_cached


def test_faster_than_compile_but_not_eager_records_neither_claim_as_3() -> None:
    res, _ = _finish({"eager": [1.0] * 30, "candidate": [1.0] * 30}, [2.0] * 30, None)
    assert res.reward == 1 and not res.faster_than_eager and not res.faster_than_compile


def test_a_speedup_printed_above_the_bar_but_not_credited_says_it_is_within_noise() -> None:
    # median ratio 0.8 (1.25x) but 18 of 40 rounds at 1.0: the interval reaches below 1/0.95
    cand = [0.8] * 18 + [1.0] * 18 + [0.7] * 4
    res, _ = _finish({"eager": [1.0] * 40, "candidate": cand}, [2.0] * 40, None)
    assert res.reward == 1 and res.speedup_vs_eager > 1 / 0.95
    assert res.speedup_interval["eager"][0] <= 1 / 0.95
    assert "1.25x vs eager is within noise" in res.reason and "does not clear 1.053x" in res.reason
    assert "vs torch.compile is within noise" not in res.reason  # its interval clears; eager decided
    clear, _ = _finish({"eager": [1.0] * 40, "candidate": [0.8] * 40}, [2.0] * 40, None)
    assert clear.reward == 3 and "within noise" not in clear.reason
    # eager not above the bar: torch.compile's noise decides nothing and is not talked about
    slow, _ = _finish({"eager": [1.0] * 40, "candidate": [1.0] * 40}, [1.0 / 0.8] * 18 + [1.0] * 22, None)
    assert slow.reward == 1 and "within noise" not in slow.reason
    # eager cleared, torch.compile above its bar but within noise: said, it decided 2 rather than 3
    two, _ = _finish({"eager": [1.0] * 40, "candidate": [0.5] * 40}, [0.5 / 0.8] * 18 + [0.5] * 18 + [0.5 / 0.7] * 4, None)
    assert two.reward == 2 and "vs torch.compile is within noise" in two.reason
