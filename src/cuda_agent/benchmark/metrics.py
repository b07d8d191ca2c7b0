"""The paper's metrics (SPEC §5), per level and overall, from a run's records.

Every rate is over all tasks of the suite in that scope: a task with no record (the run
stopped early), no solution, a failed episode or a harness error counts as not compiled,
not correct, not faster, reward −1 ("missing" in the reward counts when it has no record).

* faster than eager / torch.compile: the environment's own decision fields
  (`EvalResult.faster_than_eager`, `.faster_than_compile`), which call a candidate faster
  only when the whole 99% confidence interval of its median per-round time ratio is below
  1 − margin; an exact tie at the margin is therefore not faster. The environment's
  `faster_than_compile` is the reward-3 condition: faster than eager *and* torch.compile.
* geometric-mean speedups: over correct tasks that have a measured speedup.
* fast_p (KernelBench): share of *all* tasks that are correct with speedup > p (strict, so
  a speedup of exactly p does not count), for p in 0, 0.5, 0.8, 1, 1.5, 2; vs eager (as
  KernelBench) and vs torch.compile.
* where only times exist (baselines imported from KernelBench's timing JSON), "faster"
  means t < (1 − margin) · t_base, the same "more than 5%" with the tie not counted.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, Field

from .records import TaskRecord

FAST_P = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)
MARGIN = 0.05
REWARDS = ("-1", "1", "2", "3")


class Metrics(BaseModel):
    """Metrics of one scope (a level, or all tasks)."""

    scope: str
    level: int | None = None
    tasks: int = Field(description="tasks in this scope of the suite: the denominator of every rate")
    recorded: int = 0
    missing: int = Field(default=0, description="tasks without any record")
    compiled: int = 0
    correct: int = 0
    faster_than_eager: int = 0
    faster_than_compile: int = 0
    compiled_rate: float = 0.0
    pass_rate: float = 0.0
    faster_than_eager_rate: float = 0.0
    faster_than_compile_rate: float = 0.0
    geomean_vs_eager: float | None = None
    geomean_vs_eager_n: int = 0
    geomean_vs_compile: float | None = None
    geomean_vs_compile_n: int = 0
    fast_p_eager: dict[str, float] = Field(default_factory=dict)
    fast_p_compile: dict[str, float] = Field(default_factory=dict)
    rewards: dict[str, int] = Field(default_factory=dict, description="-1 / 1 / 2 / 3 / missing")
    statuses: dict[str, int] = Field(default_factory=dict)
    episodes: int = Field(default=0, description="records that came from a policy episode")
    tokens_mean: float | None = None
    tokens_median: float | None = None
    tokens_total: int | None = None
    turns_mean: float | None = None
    turns_median: float | None = None


class BenchMetrics(BaseModel):
    overall: Metrics
    levels: list[Metrics]
    margin: float = MARGIN
    fast_p: list[float] = Field(default_factory=lambda: list(FAST_P))


def geomean(values: Iterable[float]) -> float | None:
    vals = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def fast_p(speedups: Sequence[float | None], total: int, p: float) -> float:
    """KernelBench's fast_p: correct tasks (speedup given) with speedup > p, over `total`."""
    if total <= 0:
        return 0.0
    return sum(1 for s in speedups if s is not None and s > p) / total


def clearly_faster_by_time(t: float, t_base: float, margin: float = MARGIN) -> bool:
    """'More than `margin` faster' from two times; an exact tie at the margin is not faster."""
    return t > 0 and t_base > 0 and t < (1.0 - margin) * t_base


def scope_metrics(scope: str, level: int | None, task_names: Sequence[str], records: dict[str, TaskRecord],
                  thresholds: Sequence[float] = FAST_P) -> Metrics:
    """Metrics over `task_names`, reading each task's record from `records` (absent = missing)."""
    recs = [records[n] for n in task_names if n in records]
    n = len(task_names)
    m = Metrics(scope=scope, level=level, tasks=n, recorded=len(recs), missing=n - len(recs))
    m.compiled = sum(r.compiled for r in recs)
    m.correct = sum(r.correct for r in recs)
    m.faster_than_eager = sum(bool(r.correct and r.result and r.result.faster_than_eager) for r in recs)
    m.faster_than_compile = sum(bool(r.correct and r.result and r.result.faster_than_compile) for r in recs)
    if n:
        m.compiled_rate, m.pass_rate = m.compiled / n, m.correct / n
        m.faster_than_eager_rate, m.faster_than_compile_rate = m.faster_than_eager / n, m.faster_than_compile / n
    eager = [r.speedup_vs_eager for r in recs]
    comp = [r.speedup_vs_compile for r in recs]
    m.geomean_vs_eager, m.geomean_vs_eager_n = geomean(s for s in eager if s), sum(1 for s in eager if s)
    m.geomean_vs_compile, m.geomean_vs_compile_n = geomean(s for s in comp if s), sum(1 for s in comp if s)
    m.fast_p_eager = {_p(p): fast_p(eager, n, p) for p in thresholds}
    m.fast_p_compile = {_p(p): fast_p(comp, n, p) for p in thresholds}
    m.rewards = {k: sum(1 for r in recs if str(r.reward) == k) for k in REWARDS}
    m.rewards["missing"] = m.missing
    for r in recs:
        m.statuses[r.status] = m.statuses.get(r.status, 0) + 1
    episodes = [r.episode for r in recs if r.episode is not None]
    m.episodes = len(episodes)
    tokens = [e.tokens for e in episodes if e.tokens is not None]
    turns = [e.turns for e in episodes if e.turns is not None]
    if tokens:
        m.tokens_mean, m.tokens_median, m.tokens_total = statistics.fmean(tokens), statistics.median(tokens), sum(tokens)
    if turns:
        m.turns_mean, m.turns_median = statistics.fmean(turns), statistics.median(turns)
    return m


def compute_metrics(records: Iterable[TaskRecord], suite: dict[str, int | None] | None = None,
                    thresholds: Sequence[float] = FAST_P) -> BenchMetrics:
    """Per-level and overall metrics. `suite` (task name -> level, in order) is the
    denominator; without it, the recorded tasks are the suite."""
    latest = {r.task: r for r in records}
    if suite is None:
        suite = {name: r.level for name, r in latest.items()}
    by_level: dict[int | None, list[str]] = {}
    for name, level in suite.items():
        by_level.setdefault(level, []).append(name)
    levels = [scope_metrics(f"level {lv}" if lv is not None else "no level", lv, names, latest, thresholds)
              for lv, names in sorted(by_level.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))]
    overall = scope_metrics("overall", None, list(suite), latest, thresholds)
    return BenchMetrics(overall=overall, levels=levels, fast_p=list(thresholds))


def _p(p: float) -> str:
    return f"{p:g}"
