"""The milestone reward of SPEC §1, computed from evidence in the parent process.

-1 compile or correctness failure; 1 correct but not faster; 2 more than `margin` faster
than eager only; 3 more than `margin` faster than eager and torch.compile.
"""

from __future__ import annotations

import math


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
