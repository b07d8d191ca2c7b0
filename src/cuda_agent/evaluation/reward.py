"""The milestone reward of SPEC §1, computed from evidence in the parent process.

-1 compile or correctness failure; 1 correct but not faster; 2 more than `margin` faster
than eager only; 3 more than `margin` faster than eager and torch.compile.
"""

from __future__ import annotations

import math
from typing import Sequence

from .timing import clears, median_interval


def milestone_reward(correct: bool, faster_than_eager: bool, faster_than_compile: bool) -> int:
    if not correct:
        return -1
    if faster_than_eager and faster_than_compile:
        return 3
    if faster_than_eager:
        return 2
    return 1


def speedup_score(correct: bool, speedup_vs_compile: float | None) -> float:
    """Continuous score for analysis (the paper's ablation): log2 of the speedup over
    torch.compile, clipped to [-4, 4]; -5 for an incorrect candidate."""
    if not correct:
        return -5.0
    if not speedup_vs_compile or speedup_vs_compile <= 0:
        return 0.0
    return max(-4.0, min(4.0, math.log2(speedup_vs_compile)))


def describe(correct: bool, fe: bool, fc: bool, s_eager: float | None, s_compile: float | None) -> str:
    if not correct:
        return "incorrect"
    parts = []
    if s_eager is not None:
        parts.append(f"{s_eager:.2f}x vs eager")
    if s_compile is not None:
        parts.append(f"{s_compile:.2f}x vs torch.compile")
    detail = f" ({', '.join(parts)})" if parts else ""
    if fe and fc:
        return f"correct, faster than eager and torch.compile{detail}"
    if fe:
        return f"correct, faster than eager only{detail}"
    return f"correct, not faster{detail}"


def faster_over_workloads(ratio_sets: Sequence[Sequence[float]], margin: float, confidence: float) -> bool:
    """The speed claim over several workloads: each workload's paired per-round time ratios
    (candidate / base) give an upper confidence bound of its median at a Bonferroni-adjusted
    level (all k bounds hold together with `confidence`); the claim holds when the geometric
    mean of those upper bounds is below 1 - margin. One workload: exactly `clearly_faster`."""
    if not ratio_sets or any(not r for r in ratio_sets):
        return False
    level = 1 - (1 - confidence) / len(ratio_sets)
    uppers = [median_interval(r, level)[1] for r in ratio_sets]
    if any(u <= 0 for u in uppers):
        return False
    return clears(math.exp(-sum(math.log(u) for u in uppers) / len(uppers)), 1.0, margin)
