"""The noise-aware 'faster' decision over paired per-round time ratios.

Why: run-to-run drift (clocks, neighbours, thermals) moves medians of separate runs by
several percent, enough to call identical code 5% faster. The judge times every model once
per round in a shuffled order (judge.py), so per-round ratios are paired samples; the
decision asks whether the whole confidence interval of the median ratio clears the margin,
not whether one point estimate does.
"""

from __future__ import annotations

import math
from typing import Sequence


def median_interval(xs: Sequence[float], confidence: float) -> tuple[float, float]:
    """Distribution-free confidence interval of the median (binomial order statistics)."""
    s = sorted(xs)
    n = len(s)
    if n < 3:
        return s[0], s[-1]
    alpha = 1 - confidence
    # largest j with P(Bin(n, 1/2) < j) <= alpha/2, computed in log space for large n
    cdf, j = 0.0, 0
    log_half_n = n * math.log(0.5)
    for i in range(n + 1):
        p = math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + log_half_n)
        if cdf + p > alpha / 2:
            break
        cdf += p
        j = i + 1
    lo = max(0, j - 1)
    hi = min(n - 1, n - j)
    return s[lo], s[hi]


def clearly_faster(ratios: Sequence[float], margin: float, confidence: float) -> bool:
    """True if even the upper confidence bound of the median time ratio (candidate / base)
    is below 1 - margin: faster by more than the margin, beyond the measured noise."""
    if not ratios:
        return False
    _, upper = median_interval(ratios, confidence)
    return upper < 1 - margin
