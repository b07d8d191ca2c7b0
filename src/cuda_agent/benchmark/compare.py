"""`compare_runs(A, B)`: per-task and aggregate differences between two runs.

Tasks are matched by name (each task's first sample). The aggregate compares each run's
metrics over the tasks both runs cover (so a longer run does not look worse for its extra
tasks), and lists the tasks only one run has.

"faster" / "slower" use the reward's rule (`evaluation.timing.clears`): B is faster than A
only when even the pessimistic end of the two speedup intervals (B's lower bound over A's
upper bound, speedups vs each run's own eager) is more than the margin above 1. Two runs of
the same code are therefore "same", however their point estimates fall.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field

from ..evaluation.timing import clears
from .metrics import CONFIDENCE, MARGIN, BenchMetrics, compute_metrics, is_high_variance, speedup_bounds
from .records import TaskRecord, primary

Change = Literal["fixed", "broke", "faster", "slower", "same", "still failing", "only in A", "only in B",
                 "skipped"]


class TaskDiff(BaseModel):
    task: str
    level: int | None
    change: Change
    reward_a: int | None
    reward_b: int | None
    speedup_vs_eager_a: float | None = None
    speedup_vs_eager_b: float | None = None
    speedup_vs_compile_a: float | None = None
    speedup_vs_compile_b: float | None = None
    ratio_vs_eager: float | None = Field(default=None, description="B's speedup vs eager / A's (point estimate)")
    bounds_vs_eager_a: tuple[float, float] | None = Field(default=None, description="A's speedup interval")
    bounds_vs_eager_b: tuple[float, float] | None = None
    high_variance: bool = Field(default=False, description="an interval too wide to resolve the margin")


class Comparison(BaseModel):
    a: str
    b: str
    common: int
    only_a: list[str]
    only_b: list[str]
    metrics_a: BenchMetrics
    metrics_b: BenchMetrics
    tasks: list[TaskDiff]
    counts: dict[str, int]


def compare_runs(a: Sequence[TaskRecord], b: Sequence[TaskRecord], label_a: str = "A", label_b: str = "B",
                 suite_a: dict[str, int | None] | None = None, suite_b: dict[str, int | None] | None = None, *,
                 margin: float = MARGIN, confidence: float = CONFIDENCE) -> Comparison:
    """Differences of B relative to A. `suite_*` (name -> level) count a run's missing tasks."""
    ra, rb = primary(a), primary(b)
    sa = suite_a if suite_a is not None else {n: r.level for n, r in ra.items()}
    sb = suite_b if suite_b is not None else {n: r.level for n, r in rb.items()}
    common = {n: sa[n] if sa[n] is not None else sb[n] for n in sa if n in sb}
    diffs = [_diff(n, sa.get(n, sb.get(n)), ra.get(n), rb.get(n), n in sa, n in sb, margin, confidence)
             for n in [*sa, *(n for n in sb if n not in sa)]]
    counts = dict(Counter(d.change for d in diffs))
    kw = dict(margin=margin, confidence=confidence)
    return Comparison(a=label_a, b=label_b, common=len(common),
                      only_a=[n for n in sa if n not in sb], only_b=[n for n in sb if n not in sa],
                      metrics_a=compute_metrics(a, common, **kw), metrics_b=compute_metrics(b, common, **kw),
                      tasks=diffs, counts=counts)


def _diff(name: str, level: int | None, a: TaskRecord | None, b: TaskRecord | None, in_a: bool,
          in_b: bool, margin: float, confidence: float) -> TaskDiff:
    d = TaskDiff(task=name, level=level, change="same", reward_a=a.reward if a and a.status != "skipped" else None,
                 reward_b=b.reward if b and b.status != "skipped" else None,
                 speedup_vs_eager_a=a.speedup_vs_eager if a else None,
                 speedup_vs_eager_b=b.speedup_vs_eager if b else None,
                 speedup_vs_compile_a=a.speedup_vs_compile if a else None,
                 speedup_vs_compile_b=b.speedup_vs_compile if b else None,
                 bounds_vs_eager_a=speedup_bounds(a, "eager", confidence),
                 bounds_vs_eager_b=speedup_bounds(b, "eager", confidence))
    if d.speedup_vs_eager_a and d.speedup_vs_eager_b:
        d.ratio_vs_eager = d.speedup_vs_eager_b / d.speedup_vs_eager_a
    d.high_variance = is_high_variance(d.bounds_vs_eager_a, margin) or is_high_variance(d.bounds_vs_eager_b, margin)
    ok_a, ok_b = bool(a and a.correct), bool(b and b.correct)
    ba, bb = d.bounds_vs_eager_a, d.bounds_vs_eager_b
    if not in_b:
        d.change = "only in A"
    elif not in_a:
        d.change = "only in B"
    elif (a is not None and a.status == "skipped") or (b is not None and b.status == "skipped"):
        d.change = "skipped"
    elif ok_a != ok_b:
        d.change = "fixed" if ok_b else "broke"
    elif not ok_a:
        d.change = "still failing"
    elif ba is not None and bb is not None and math.isfinite(ba[1]) and clears(bb[0] / ba[1], 1.0, margin):
        d.change = "faster"
    elif ba is not None and bb is not None and math.isfinite(bb[1]) and clears(ba[0] / bb[1], 1.0, margin):
        d.change = "slower"
    return d
