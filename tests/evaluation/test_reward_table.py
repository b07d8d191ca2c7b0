"""The reward, pinned rule by rule: the table for every combination of (correct, faster than
eager, faster than torch.compile), the words that go with it, the continuous score's clips,
and the speed claim over several workloads (Bonferroni-adjusted, geometric mean, margin).

Each test names the broken rule it is there to catch (bench/mutation_check.py applies those
breaks and checks that these tests fail)."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from cuda_agent.evaluation.reward import describe, faster_over_workloads, milestone_reward, speedup_score
from cuda_agent.evaluation.timing import clearly_faster, median_interval

# SPEC §1: -1 incorrect; 1 correct, not faster; 2 faster than eager only; 3 faster than both.
# "Faster than torch.compile" without "faster than eager" is worth 1: the milestone is eager first.
REWARD_TABLE = {
    (False, False, False): -1, (False, False, True): -1, (False, True, False): -1, (False, True, True): -1,
    (True, False, False): 1, (True, False, True): 1, (True, True, False): 2, (True, True, True): 3,
}


@pytest.mark.parametrize("correct,fe,fc", list(itertools.product([False, True], repeat=3)))
def test_reward_table_all_eight_combinations(correct: bool, fe: bool, fc: bool) -> None:
    assert milestone_reward(correct, fe, fc) == REWARD_TABLE[(correct, fe, fc)]


def test_faster_than_compile_but_not_eager_is_not_reward_3() -> None:
    # a kernel slower than eager cannot be worth 3, whatever torch.compile did
    assert milestone_reward(True, False, True) == 1


def test_describe_says_what_the_reward_says() -> None:
    assert describe(False, True, True, 9.0, 9.0) == "incorrect"
    assert describe(True, False, False, None, None) == "correct, not faster"
    assert describe(True, True, False, 1.5, 0.9) == "correct, faster than eager only (1.50x vs eager, 0.90x vs torch.compile)"
    assert describe(True, True, True, 2.0, 1.25) == ("correct, faster than eager and torch.compile "
                                                     "(2.00x vs eager, 1.25x vs torch.compile)")
    assert describe(True, False, True, 0.9, 1.1).startswith("correct, not faster")


@pytest.mark.parametrize("correct,speedup,score", [
    (False, 4.0, -5.0), (False, None, -5.0), (True, None, 0.0), (True, 0.0, 0.0), (True, -1.0, 0.0),
    (True, 1.0, 0.0), (True, 2.0, 1.0), (True, 0.5, -1.0), (True, 16.0, 4.0), (True, 1000.0, 4.0),
    (True, 1 / 16, -4.0), (True, 1e-6, -4.0), (True, math.sqrt(2), 0.5),
])
def test_speedup_score_is_log2_clipped_to_4(correct: bool, speedup: float | None, score: float) -> None:
    assert speedup_score(correct, speedup) == pytest.approx(score)


# ---- the speed claim over several workloads -------------------------------------------------
def _stepped(n: int, below: int, low: float = 0.90, high: float = 1.0) -> list[float]:
    """n ratios: `below` of them at `low`, the rest at `high`, shuffled (order must not matter)."""
    xs = [low] * below + [high] * (n - below)
    random.Random(n * 31 + below).shuffle(xs)
    return xs


def test_one_workload_is_exactly_clearly_faster() -> None:
    rng = random.Random(7)
    for _ in range(300):
        centre = rng.uniform(0.85, 1.05)
        ratios = [rng.gauss(centre, 0.04) for _ in range(rng.randint(3, 80))]
        assert faster_over_workloads([ratios], 0.05, 0.99) == clearly_faster(ratios, 0.05, 0.99)


def test_bonferroni_adjustment_is_applied() -> None:
    # n = 100 rounds: the 99% upper bound of the median is the 64th smallest ratio (index 63),
    # the 99.5% one (two workloads, each at 1 - 0.01/2) the 65th (index 64)
    assert median_interval(_stepped(100, 64), 0.99)[1] == 0.90
    assert median_interval(_stepped(100, 64), 0.995)[1] == 1.0
    one = _stepped(100, 64)
    assert faster_over_workloads([one], 0.05, 0.99)           # alone at 99%: clears
    assert not faster_over_workloads([one, one], 0.05, 0.99)  # two together, each at 99.5%: not
    two = _stepped(100, 65)
    assert faster_over_workloads([two, two], 0.05, 0.99)
    # three workloads: each at 1 - 0.01/3, the 66th smallest (index 65; 99.5% would give 64)
    assert not faster_over_workloads([two, two, two], 0.05, 0.99)
    assert faster_over_workloads([_stepped(100, 66)] * 3, 0.05, 0.99)


def test_bonferroni_level_matches_each_workloads_interval() -> None:
    rng = random.Random(11)
    for k in (2, 3, 5):
        for _ in range(60):
            sets = [[rng.gauss(0.93, 0.05) for _ in range(60)] for _ in range(k)]
            uppers = [median_interval(s, 1 - 0.01 / k)[1] for s in sets]
            geo = math.exp(sum(math.log(u) for u in uppers) / k)
            assert faster_over_workloads(sets, 0.05, 0.99) == (geo < 0.95 and (1 / geo) * 0.95 > 1)


def test_multi_workload_claim_keeps_the_margin() -> None:
    steady3 = [0.97] * 50  # a steady 3% speedup: faster, but not by more than 5%
    assert not faster_over_workloads([steady3, steady3], 0.05, 0.99)
    assert not faster_over_workloads([steady3], 0.05, 0.99)
    steady6 = [0.94] * 50
    assert faster_over_workloads([steady6, steady6], 0.05, 0.99)
    assert not faster_over_workloads([steady6, steady6], 0.10, 0.99)  # the margin is the caller's
    # at the margin exactly: a tie is not more than 5%
    assert not faster_over_workloads([[0.95] * 50, [0.95] * 50], 0.05, 0.99)
    assert faster_over_workloads([[0.95 * (1 - 1e-9)] * 50] * 2, 0.05, 0.99)


def test_multi_workload_claim_is_the_geometric_mean_of_the_upper_bounds() -> None:
    # upper bounds 0.5 and 1.4: arithmetic mean 0.95 (a tie: no), geometric 0.837 (yes)
    assert faster_over_workloads([[0.5] * 40, [1.4] * 40], 0.05, 0.99)
    # 0.90 and 1.01: one workload slower; geometric mean 0.953: no
    assert not faster_over_workloads([[0.90] * 40, [1.01] * 40], 0.05, 0.99)
    # 0.88 and 1.02: geometric mean 0.947: yes (a slower workload can be outweighed)
    assert faster_over_workloads([[0.88] * 40, [1.02] * 40], 0.05, 0.99)


def test_multi_workload_claim_needs_every_workload_measured() -> None:
    assert not faster_over_workloads([], 0.05, 0.99)
    assert not faster_over_workloads([[0.5] * 40, []], 0.05, 0.99)
    assert not faster_over_workloads([[0.5] * 40, [0.0] * 40], 0.05, 0.99)  # a zero bound is no measurement
