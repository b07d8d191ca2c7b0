"""The paper's metrics (SPEC §5), per level and overall, from a run's records (docs/benchmark.md).

Every rate is over all tasks of the suite in that scope: a task with no record, no solution, a
failed episode or a harness error counts as failed; one `skipped` (this machine cannot run it)
is left out of every denominator. Every speed claim uses `evaluation.timing.clears`, the
reward's rule, so identical code is never counted faster; KernelBench's point-estimate fast_p
is kept beside it (`fast_p_*_point`). pass@k is KernelBench's unbiased estimator.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, Field

from ..evaluation.timing import clears, median_se, summary_interval
from .records import TaskRecord, by_level, by_sample, primary, scope_name

FAST_P = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)
PASS_K = (1, 5, 10, 100)
MARGIN = 0.05
CONFIDENCE = 0.99
REWARDS = ("-1", "1", "2", "3")
Baseline = Literal["eager", "compile"]


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
    fast_p_eager: dict[str, float] = Field(default_factory=dict, description="noise-aware (the reward's rule)")
    fast_p_compile: dict[str, float] = Field(default_factory=dict, description="noise-aware (the reward's rule)")
    fast_p_eager_point: dict[str, float] = Field(default_factory=dict, description="KernelBench's point estimate")
    fast_p_compile_point: dict[str, float] = Field(default_factory=dict, description="KernelBench's point estimate")
    high_variance: int = Field(default=0, description="timed tasks whose interval vs eager cannot resolve the margin")
    skipped: int = Field(default=0, description="tasks this machine could not run; not in `tasks`")
    pass_at_k: dict[str, float] = Field(default_factory=dict, description="k -> mean unbiased pass@k")
    samples_min: int = 0
    samples_max: int = 0
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
    confidence: float = CONFIDENCE
    fast_p: list[float] = Field(default_factory=lambda: list(FAST_P))
    pass_k: list[int] = Field(default_factory=list)


def geomean(values: Iterable[float]) -> float | None:
    vals = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def fast_p(speedups: Sequence[float | None], total: int, p: float) -> float:
    """KernelBench's fast_p point estimate: correct tasks (speedup given) with speedup > p, over `total`."""
    if total <= 0:
        return 0.0
    return sum(1 for s in speedups if s is not None and s > p) / total


def clearly_faster_by_time(t: float, t_base: float, margin: float = MARGIN) -> bool:
    """`clears(t_base / t, 1, margin)` for two bare times (no spread known), multiplied out so
    an exact tie at the margin stays a tie (the quotient can round either way)."""
    return t > 0 and t_base > 0 and t < (1.0 - margin) * t_base


def speedup_bounds(r: TaskRecord | None, baseline: Baseline, confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """Confidence interval of a correct record's speedup vs `baseline`, from the per-model
    summaries it keeps (the medians the speedup is made of, their spread and rounds); None
    when it was not timed against that baseline."""
    if r is None or not r.correct or r.result is None:
        return None
    res = r.result
    base_stats = res.eager_stats if baseline == "eager" else res.compile_stats
    base_t = res.time_ms.eager if baseline == "eager" else res.time_ms.compile
    cand, cand_t = res.candidate_stats, res.time_ms.candidate
    if base_stats is None or cand is None or not base_t or not cand_t:
        return None
    return summary_interval((base_t, median_se(base_stats.std, base_stats.trials), base_stats.trials),
                            (cand_t, median_se(cand.std, cand.trials), cand.trials), confidence)


def counts_in_fast_p(r: TaskRecord | None, baseline: Baseline, p: float, margin: float = MARGIN,
                     confidence: float = CONFIDENCE) -> bool:
    """The noise-aware fast_p test of one task (see the module's docstring)."""
    if r is None or not r.correct or r.result is None:
        return False
    point = r.speedup_vs_eager if baseline == "eager" else r.speedup_vs_compile
    if point is None:
        return False
    if p <= 0:
        return True
    decided = r.result.faster_than_eager if baseline == "eager" else r.result.faster_than_compile
    if decided and p <= 1:
        return True
    bounds = speedup_bounds(r, baseline, confidence)
    return bounds is not None and clears(bounds[0], p, margin)


def is_high_variance(bounds: tuple[float, float] | None, margin: float = MARGIN) -> bool:
    """An interval wider than (1 + margin) / (1 − margin): it cannot tell a margin-sized change."""
    return bounds is not None and (bounds[0] <= 0 or bounds[1] / bounds[0] > (1 + margin) / (1 - margin))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one task with n samples, c correct: 1 − C(n − c, k) / C(n, k)
    (Chen et al. 2021; KernelBench's `calc_pass_at_k`, whose k > n means k = n)."""
    if n <= 0:
        return 0.0
    k = min(k, n)
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def scope_metrics(scope: str, level: int | None, task_names: Sequence[str], records: dict[str, TaskRecord],
                  thresholds: Sequence[float] = FAST_P, *, samples: dict[str, dict[int, TaskRecord]] | None = None,
                  n_samples: int = 1, pass_k: Sequence[int] = (), margin: float = MARGIN,
                  confidence: float = CONFIDENCE) -> Metrics:
    """Metrics over `task_names`, reading each task's record from `records` (absent = missing;
    `skipped` = left out). `samples` (task -> sample -> record) feeds pass@k, each task counted
    with at least `n_samples` samples (a sample without a record failed)."""
    skipped = [n for n in task_names if n in records and records[n].status == "skipped"]
    task_names = [n for n in task_names if n not in set(skipped)]
    recs = [records[n] for n in task_names if n in records]
    n = len(task_names)
    m = Metrics(scope=scope, level=level, tasks=n, recorded=len(recs), missing=n - len(recs), skipped=len(skipped))
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
    for base, noisy, point in (("eager", m.fast_p_eager, m.fast_p_eager_point),
                               ("compile", m.fast_p_compile, m.fast_p_compile_point)):
        for p in thresholds:
            noisy[f"{p:g}"] = sum(counts_in_fast_p(r, base, p, margin, confidence) for r in recs) / n if n else 0.0
            point[f"{p:g}"] = fast_p(eager if base == "eager" else comp, n, p)
    m.high_variance = sum(is_high_variance(speedup_bounds(r, "eager", confidence), margin) for r in recs)
    if samples is not None and pass_k:
        counts = [(max(n_samples, len(samples.get(t, {}))), sum(r.correct for r in samples.get(t, {}).values()))
                  for t in task_names]
        m.samples_min = min((c[0] for c in counts), default=0)
        m.samples_max = max((c[0] for c in counts), default=0)
        m.pass_at_k = {str(k): (sum(pass_at_k(ns, nc, k) for ns, nc in counts) / n if n else 0.0) for k in pass_k}
    m.rewards = {k: sum(1 for r in recs if str(r.reward) == k) for k in REWARDS}
    m.rewards["missing"] = m.missing
    m.statuses = dict(Counter(r.status for r in recs))
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
                    thresholds: Sequence[float] = FAST_P, *, n_samples: int = 1, margin: float = MARGIN,
                    confidence: float = CONFIDENCE) -> BenchMetrics:
    """Per-level and overall metrics. `suite` (task name -> level, in order) is the
    denominator; without it, the recorded tasks are the suite. Headline metrics read each
    task's first sample; pass@k reads them all (`n_samples`: samples the run asked for)."""
    records = list(records)
    latest = primary(records)
    samples = by_sample(records)
    if suite is None:
        suite = {name: r.level for name, r in latest.items()}
    most = max([n_samples, *(len(v) for v in samples.values())])
    ks = [k for k in PASS_K if k <= most] or [1]
    kw = dict(samples=samples, n_samples=n_samples, pass_k=ks, margin=margin, confidence=confidence)
    levels = [scope_metrics(scope_name(lv), lv, names, latest, thresholds, **kw)
              for lv, names in by_level(suite, suite.get).items()]
    overall = scope_metrics("overall", None, list(suite), latest, thresholds, **kw)
    return BenchMetrics(overall=overall, levels=levels, fast_p=list(thresholds), pass_k=ks, margin=margin,
                        confidence=confidence)
