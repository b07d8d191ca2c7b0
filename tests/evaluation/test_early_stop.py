"""The timed rounds stop early only when more rounds could not change a 'faster' decision, and
the reward's own test then agrees with the early one (judge.settled vs timing.clearly_faster)."""

from __future__ import annotations

import random

import pytest

from cuda_agent.evaluation.judge import EARLY_LOOKS, FUTILE_EVERY, FUTILE_LEVEL, futile, settled
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


def _at_parity(noise: float, n: int, seed: int) -> dict[str, list[float]]:
    rng = random.Random(seed)
    return {"eager": [1.0] * n, "candidate": [1.0 + rng.uniform(-noise, noise) for _ in range(n)]}


def test_a_candidate_at_parity_stops_as_not_faster_at_the_laxer_level():
    """The reference as its own solution, rounds spread +-8%: the strict level cannot rule out
    'faster' at 24 rounds, so without the laxer stop the rounds ran to the budget (level1/73 on an
    H100: 33 rounds, 1.0 s); with it they stop, and the reward's own test agrees."""
    s = _at_parity(0.08, EARLY_LOOKS[1], seed=5)
    assert not settled(s, MARGIN, LEVEL)
    assert settled(s, MARGIN, LEVEL, futile_level=FUTILE_LEVEL)
    assert not clearly_faster(s["candidate"], MARGIN, CONFIDENCE)


def test_the_laxer_stop_only_ever_says_not_faster():
    """Over noisy draws from clearly faster to clearly slower: wherever the laxer rule settles what the
    strict one did not, the reward's own test says 'not faster', and the median is at or above the bar."""
    stopped = 0
    for seed in range(300):
        rng = random.Random(seed)
        ratio = rng.uniform(0.8, 1.1)
        s = _samples(ratio, rng.uniform(0.02, 0.3), rng.choice(EARLY_LOOKS[:4]), seed)
        if settled(s, MARGIN, LEVEL, futile_level=FUTILE_LEVEL) and not settled(s, MARGIN, LEVEL):
            stopped += 1
            ratios = [c / b for c, b in zip(s["candidate"], s["eager"])]
            assert not clearly_faster(ratios, MARGIN, CONFIDENCE)
            assert sorted(ratios)[len(ratios) // 2] >= 1 - MARGIN
    assert stopped > 10  # the rule is exercised, not vacuous


def test_eager_out_of_reach_settles_whatever_compile_does():
    """torch.compile's bar counts only once eager's is cleared: a candidate at parity with eager is
    settled even where its ratio to compile straddles the bar."""
    s = _at_parity(0.03, EARLY_LOOKS[1], seed=6)
    s["compile"] = [c / (1 - MARGIN) * (1 + 0.05 * (-1) ** i) for i, c in enumerate(s["candidate"])]
    assert settled(s, MARGIN, LEVEL, futile_level=FUTILE_LEVEL)
    s["eager"] = [c / (1 - MARGIN) * (1 + 0.05 * (-1) ** i) for i, c in enumerate(s["candidate"])]  # now straddles
    assert not settled(s, MARGIN, LEVEL, futile_level=FUTILE_LEVEL)


def test_the_laxer_stop_needs_no_look_of_its_own():
    """`futile` is what the rounds between the looks ask (every FUTILE_EVERY after the first look):
    eager's bar only, and only ever out of reach where the reward's own test says 'not faster'."""
    s = _at_parity(0.05, 16, seed=7)
    assert 16 not in EARLY_LOOKS and 16 % FUTILE_EVERY == 0
    assert futile(s, MARGIN, FUTILE_LEVEL) and not clearly_faster(s["candidate"], MARGIN, CONFIDENCE)
    assert not futile(s, MARGIN, None)  # off
    faster = {"eager": [1.0] * 16, "candidate": [0.8 * c for c in s["candidate"]]}
    assert not futile(faster, MARGIN, FUTILE_LEVEL)
    s["compile"] = [0.5] * 16  # torch.compile far faster than the candidate: not what this asks
    assert futile(s, MARGIN, FUTILE_LEVEL) and not futile(s, MARGIN, FUTILE_LEVEL, "missing")
