"""`compare_runs(A, B)`: per-task and aggregate differences between two runs.

Tasks are matched by name. The aggregate compares each run's metrics over the tasks both
runs cover (so a longer run does not look worse for its extra tasks), and lists the tasks
only one run has.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field

from .metrics import BenchMetrics, compute_metrics
from .records import TaskRecord

Change = Literal["fixed", "broke", "faster", "slower", "same", "still failing", "only in A", "only in B"]
SPEEDUP_CHANGE = 0.05  # a per-task speedup change under 5% is "same" (timing noise)


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
    ratio_vs_eager: float | None = Field(default=None, description="B's speedup vs eager / A's")


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
                 suite_a: dict[str, int | None] | None = None,
                 suite_b: dict[str, int | None] | None = None) -> Comparison:
    """Differences of B relative to A. `suite_*` (name -> level) count a run's missing tasks."""
    ra, rb = {r.task: r for r in a}, {r.task: r for r in b}
    sa = suite_a if suite_a is not None else {n: r.level for n, r in ra.items()}
    sb = suite_b if suite_b is not None else {n: r.level for n, r in rb.items()}
    common = {n: sa[n] if sa[n] is not None else sb[n] for n in sa if n in sb}
    diffs = [_diff(n, sa.get(n, sb.get(n)), ra.get(n), rb.get(n), n in sa, n in sb)
             for n in [*sa, *(n for n in sb if n not in sa)]]
    counts: dict[str, int] = {}
    for d in diffs:
        counts[d.change] = counts.get(d.change, 0) + 1
    return Comparison(a=label_a, b=label_b, common=len(common),
                      only_a=[n for n in sa if n not in sb], only_b=[n for n in sb if n not in sa],
                      metrics_a=compute_metrics(a, common), metrics_b=compute_metrics(b, common),
                      tasks=diffs, counts=counts)


def _diff(name: str, level: int | None, a: TaskRecord | None, b: TaskRecord | None, in_a: bool,
          in_b: bool) -> TaskDiff:
    d = TaskDiff(task=name, level=level, change="same", reward_a=a.reward if a else None,
                 reward_b=b.reward if b else None,
                 speedup_vs_eager_a=a.speedup_vs_eager if a else None, speedup_vs_eager_b=b.speedup_vs_eager if b else None,
                 speedup_vs_compile_a=a.speedup_vs_compile if a else None,
                 speedup_vs_compile_b=b.speedup_vs_compile if b else None)
    if d.speedup_vs_eager_a and d.speedup_vs_eager_b:
        d.ratio_vs_eager = d.speedup_vs_eager_b / d.speedup_vs_eager_a
    ok_a, ok_b = bool(a and a.correct), bool(b and b.correct)
    if not in_b:
        d.change = "only in A"
    elif not in_a:
        d.change = "only in B"
    elif ok_a != ok_b:
        d.change = "fixed" if ok_b else "broke"
    elif not ok_a:
        d.change = "still failing"
    elif d.ratio_vs_eager is not None and d.ratio_vs_eager > 1 + SPEEDUP_CHANGE:
        d.change = "faster"
    elif d.ratio_vs_eager is not None and d.ratio_vs_eager < 1 / (1 + SPEEDUP_CHANGE):
        d.change = "slower"
    return d
