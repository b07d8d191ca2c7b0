"""The reward levels and the 'faster' decision rule over timed rounds."""

from __future__ import annotations

import random

import pytest

from cuda_agent.evaluation.records import TimingStats
from cuda_agent.evaluation.reward import milestone_reward, speedup_score
from cuda_agent.evaluation.timing import clearly_faster, median_interval


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
