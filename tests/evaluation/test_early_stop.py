"""The timed rounds stop early only when more rounds could not change a 'faster' decision, and
the reward's own test then agrees with the early one (judge.settled vs timing.clearly_faster)."""

from __future__ import annotations

import random

import pytest

from cuda_agent.evaluation.judge import EARLY_LOOKS, settled
from cuda_agent.evaluation.timing import clearly_faster

MARGIN, CONFIDENCE = 0.05, 0.99
LEVEL = 1 - (1 - CONFIDENCE) / (len(EARLY_LOOKS) + 1)


def _samples(ratio: float, noise: float, n: int, seed: int) -> dict[str, list[float]]:
    rng = random.Random(seed)
    eager = [1.0 + rng.uniform(-0.01, 0.01) for _ in range(n)]
    return {"eager": eager, "candidate": [e * ratio * (1 + rng.uniform(-noise, noise)) for e in eager]}


@pytest.mark.parametrize("ratio", [0.5, 0.8, 1.0, 1.3])
def test_clear_cases_settle_and_agree_with_the_reward(ratio):
    s = _samples(ratio, 0.02, EARLY_LOOKS[0], seed=1)
    assert settled(s, MARGIN, LEVEL)
    ratios = [c / b for c, b in zip(s["candidate"], s["eager"])]
    assert clearly_faster(ratios, MARGIN, CONFIDENCE) == (ratio < 1 - MARGIN)


def test_a_speedup_at_the_threshold_is_not_settled():
    s = _samples(1 - MARGIN, 0.03, EARLY_LOOKS[0], seed=2)
    assert not settled(s, MARGIN, LEVEL)


def test_every_baseline_must_be_settled():
    s = _samples(0.5, 0.01, EARLY_LOOKS[0], seed=3)
    s["compile"] = [c / (1 - MARGIN) * (1 + 0.03 * (-1) ** i) for i, c in enumerate(s["candidate"])]  # straddles
    assert not settled(s, MARGIN, LEVEL)
    del s["compile"]
    assert settled(s, MARGIN, LEVEL)


def test_settled_decisions_keep_their_error_rate():
    """A candidate exactly at the threshold, noisy: 'settled faster' at any look is rare (the
    looks share the error rate), far below the nominal 1%."""
    wrong = 0
    for seed in range(400):
        s = _samples(1 - MARGIN, 0.05, EARLY_LOOKS[-1], seed=seed)
        for n in EARLY_LOOKS:
            part = {k: v[:n] for k, v in s.items()}
            if settled(part, MARGIN, LEVEL):
                ratios = [c / b for c, b in zip(part["candidate"], part["eager"])]
                wrong += clearly_faster(ratios, MARGIN, CONFIDENCE)
                break
    assert wrong <= 4  # 1% of 400
