"""The 'faster' decision, pinned exactly: the order statistics of the median's confidence
interval, the rule `clears` at its bound, `clearly_faster` at and around the 5% margin, and
its false-call rate over seeded draws (a true 4.5% speedup must almost never count as more
than 5%)."""

from __future__ import annotations

import random
from fractions import Fraction
from math import comb

import pytest

from cuda_agent.evaluation.timing import clears, clearly_faster, median_interval, summary_interval


def _exact_indices(n: int, confidence: float) -> tuple[int, int]:
    """0-based order statistics of the distribution-free interval, in exact arithmetic: the
    largest j with P(Bin(n, 1/2) < j) <= (1 - confidence) / 2 gives [X(j), X(n - j + 1)]."""
    if n < 3:
        return 0, n - 1
    half_alpha = (1 - Fraction(confidence).limit_denominator(10**6)) / 2
    cdf, j = Fraction(0), 0
    for i in range(n + 1):
        p = Fraction(comb(n, i), 2**n)
        if cdf + p > half_alpha:
            break
        cdf, j = cdf + p, i + 1
    return max(0, j - 1), min(n - 1, n - j)


# hand-checked against tables of the binomial: (n, 0-based lower index, 0-based upper index) at 99%
ORDER_STATISTICS_99 = [(1, 0, 0), (2, 0, 1), (3, 0, 2), (7, 0, 6), (8, 0, 7), (11, 0, 10), (12, 1, 10),
                       (15, 2, 12), (20, 3, 16), (30, 7, 22), (50, 15, 34), (100, 36, 63), (200, 81, 118)]


@pytest.mark.parametrize("n,lo,hi", ORDER_STATISTICS_99)
def test_median_interval_order_statistics_at_99(n: int, lo: int, hi: int) -> None:
    xs = [float(i) for i in range(n)]
    random.Random(n).shuffle(xs)  # sorted inside: the input order must not matter
    assert median_interval(xs, 0.99) == (float(lo), float(hi))


@pytest.mark.parametrize("confidence", [0.5, 0.9, 0.95, 0.98, 0.99, 0.995, 1 - 0.01 / 3, 0.999])
def test_median_interval_matches_exact_binomial(confidence: float) -> None:
    for n in list(range(1, 60)) + [99, 100, 101, 150, 257, 400]:
        xs = [float(i) for i in range(n)]
        assert median_interval(xs, confidence) == tuple(float(i) for i in _exact_indices(n, confidence)), n


def test_median_interval_coverage_is_at_least_the_confidence() -> None:
    # for n = 100 at 99%: P(X(37) <= m <= X(64)) = 1 - 2 P(Bin(100, 1/2) <= 36) >= 0.99, and one
    # order statistic narrower falls below it
    miss = sum(Fraction(comb(100, i), 2**100) for i in range(37))
    assert 1 - 2 * miss >= Fraction(99, 100)
    assert 1 - 2 * (miss + Fraction(comb(100, 37), 2**100)) < Fraction(99, 100)


# ---- the rule ------------------------------------------------------------------------------
@pytest.mark.parametrize("lower,p,margin,expected", [
    (1.06, 1.0, 0.05, True), (1.05, 1.0, 0.05, False), (1 / 0.95, 1.0, 0.05, False),  # a tie is not enough
    (1.0527, 1.0, 0.05, True), (1.0526, 1.0, 0.05, False), (1.0, 1.0, 0.0, False), (1.0001, 1.0, 0.0, True),
    (2.2, 2.0, 0.05, True), (2.1, 2.0, 0.05, False), (1e-9, 0.0, 0.05, True), (0.0, 0.0, 0.05, False),
    (-1.0, 0.0, 0.05, False), (1.2, 1.0, 0.2, False), (1.26, 1.0, 0.2, True),
])
def test_clears(lower: float, p: float, margin: float, expected: bool) -> None:
    assert clears(lower, p, margin) is expected


def test_clearly_faster_at_the_margin() -> None:
    assert not clearly_faster([0.95] * 100, 0.05, 0.99)             # a tie at the margin: not more than 5%
    assert clearly_faster([0.95 * (1 - 1e-9)] * 100, 0.05, 0.99)
    assert not clearly_faster([0.95 * (1 + 1e-9)] * 100, 0.05, 0.99)
    assert not clearly_faster([0.97] * 100, 0.05, 0.99)             # faster, but by 3%
    assert clearly_faster([0.97] * 100, 0.02, 0.99)
    assert not clearly_faster([], 0.05, 0.99)
    assert not clearly_faster([0.0] * 10, 0.05, 0.99)                # a zero time is no measurement


def test_clearly_faster_judges_the_upper_bound_not_the_median_or_lower_bound() -> None:
    # 100 ratios: 64 clearly fast (0.90), 36 slow (1.00). The 99% interval of the median is
    # [X(37), X(64)] = [0.90, 0.90]: faster. With one more slow round the upper end is 1.00.
    fast = [0.90] * 64 + [1.00] * 36
    slow = [0.90] * 63 + [1.00] * 37
    assert clearly_faster(fast, 0.05, 0.99)
    assert not clearly_faster(slow, 0.05, 0.99)  # median 0.90, lower bound 0.90: still not faster
    # the point estimate alone would pass this one; the interval must not
    spread = [0.90 + 0.001 * i for i in range(100)]  # median 0.9495, interval ~[0.936, 0.963]
    assert not clearly_faster(spread, 0.05, 0.99)


def test_clearly_faster_with_few_rounds_needs_every_round_below() -> None:
    # n <= 7 at 99%: no order statistic reaches 99%, so the interval is the whole range
    assert clearly_faster([0.5, 0.6, 0.7, 0.8, 0.9], 0.05, 0.99)
    assert not clearly_faster([0.5, 0.6, 0.7, 0.8, 0.96], 0.05, 0.99)
    assert not clearly_faster([0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.96], 0.05, 0.99)


def test_the_budgets_floor_lets_one_slow_round_pass_and_is_the_fewest_that_does() -> None:
    """`TimingConfig.floor_trials` (where a slow model's budget ends the rounds): at the default
    confidence, its rounds' interval leaves out the slowest one, so a clearly faster kernel with
    one slow round (a preemption) keeps its credit; one round fewer would not (red team round 29)."""
    from cuda_agent.evaluation.config import TimingConfig

    t = TimingConfig()
    n = t.floor_trials
    one_slow = [0.5] * (n - 1) + [3.0]
    assert clearly_faster(one_slow, 0.05, t.confidence)
    assert not clearly_faster(one_slow[1:], 0.05, t.confidence)


# ---- false calls and power over seeded draws -------------------------------------------------
def _claims(true_ratio: float, draws: int, seed: int, n: int = 100, noise: float = 0.05,
            confidence: float = 0.99) -> int:
    rng = random.Random(seed)
    return sum(clearly_faster([rng.gauss(true_ratio, noise) for _ in range(n)], 0.05, confidence)
               for _ in range(draws))


def test_a_true_4_5_percent_speedup_is_almost_never_called_more_than_5() -> None:
    # 100 rounds with 5% noise: at 99% the rule credits a true 4.5% speedup in ~0.04% of draws;
    # at 50% confidence it would in ~7%, at 90% in ~1.4%
    false_calls = _claims(0.955, 2000, seed=1)
    assert false_calls <= 6, false_calls
    assert _claims(0.955, 2000, seed=1, confidence=0.5) > 60  # the test can tell the two apart


def test_identical_code_is_never_called_faster() -> None:
    assert _claims(1.0, 1000, seed=2) == 0
    assert _claims(0.95, 1000, seed=3) <= 10  # exactly at the margin: at most ~alpha / 2


def test_a_real_speedup_is_seen() -> None:
    assert _claims(0.85, 500, seed=4) >= 495    # 15% faster with 5% noise
    assert _claims(0.90, 500, seed=5) >= 450    # 10% faster


def test_summary_interval_is_centred_on_the_ratio_of_centres() -> None:
    lo, hi = summary_interval((2.0, 0.0, 50), (1.0, 0.0, 50), 0.99)
    assert lo == pytest.approx(2.0) and hi == pytest.approx(2.0)
    lo, hi = summary_interval((2.0, 0.02, 50), (1.0, 0.01, 50), 0.99)
    assert lo < 2.0 < hi and lo * hi == pytest.approx(4.0)
    assert summary_interval((2.0, 0.02, 1), (1.0, 0.01, 50), 0.99) == (0.0, float("inf"))


@pytest.mark.parametrize("dof,exact", [(4, 4.604), (10, 3.169), (30, 2.750), (100, 2.626), (10**6, 2.576)])
def test_t_quantile_at_99_5(dof: int, exact: float) -> None:
    from cuda_agent.evaluation.timing import _t_quantile

    assert _t_quantile(0.995, dof) == pytest.approx(exact, rel=0.013)


def test_summary_interval_widens_with_fewer_rounds() -> None:
    wide = summary_interval((2.0, 0.02, 5), (1.0, 0.01, 5), 0.99)
    narrow = summary_interval((2.0, 0.02, 500), (1.0, 0.01, 500), 0.99)
    assert wide[0] < narrow[0] < 2.0 < narrow[1] < wide[1]
