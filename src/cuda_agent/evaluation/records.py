"""Typed results of every evaluation stage. Failures are data: a field with a reason."""

from __future__ import annotations

import math
import statistics
from typing import Any, Literal, get_args

from pydantic import BaseModel, Field

from ..languages.records import BuildResult  # noqa: F401  (a build's record is part of every result)

Stage = Literal["tamper", "guard", "build", "load", "verify", "time", "worker", "done"]
LoadStep = Literal["import", "construct"]
LOAD_STEPS: tuple[str, ...] = get_args(LoadStep)


class TimingStats(BaseModel):
    """Per-trial times of one model in milliseconds, summarised."""

    median: float
    mean: float
    std: float
    min: float
    max: float
    trials: int

    @classmethod
    def of(cls, samples: list[float]) -> "TimingStats":
        if not samples:
            raise ValueError("no timing samples")
        s = sorted(samples)
        n = len(s)
        mean = sum(s) / n
        var = sum((x - mean) ** 2 for x in s) / max(n - 1, 1)
        return cls(median=statistics.median(s), mean=mean, std=math.sqrt(var), min=s[0], max=s[-1], trials=n)


class TrialCheck(BaseModel):
    """Outcome of comparing one trial's candidate outputs with the reference."""

    trial: int
    seed: int
    ok: bool
    message: str = ""
    max_abs_diff: float | None = None


class TimeMs(BaseModel):
    eager: float | None = None
    compile: float | None = None
    candidate: float | None = None


class WorkloadResult(BaseModel):
    """One workload of a multi-workload task: its verdict, times and speedups. A held-out
    workload is named by its position only: its values and the candidate's messages about it
    stay out of every record the agent can read."""

    name: str
    held_out: bool = False
    params: dict[str, Any] = Field(default_factory=dict, description="the workload's values (empty when held out)")
    correct: bool = False
    stage: Stage = "done"
    reason: str = ""
    time_ms: TimeMs = Field(default_factory=TimeMs)
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    faster_than_eager: bool = False
    faster_than_compile: bool = False
    candidate_stats: TimingStats | None = None
    calls_per_interval: int | None = None
    baseline_cached: bool = False
    trials: list[TrialCheck] = Field(default_factory=list)


class SpeedupSummary(BaseModel):
    """Per-workload speedups over one baseline, summarised three ways."""

    geomean: float
    mean: float = Field(description="arithmetic mean (FlashInfer-Bench's aggregate)")
    worst: float
    workloads: int

    @classmethod
    def of(cls, speedups: list[float]) -> "SpeedupSummary":
        if not speedups or any(s <= 0 for s in speedups):
            raise ValueError("speedups must be positive and at least one")
        return cls(geomean=math.exp(sum(math.log(s) for s in speedups) / len(speedups)),
                   mean=sum(speedups) / len(speedups), worst=min(speedups), workloads=len(speedups))


class EvalResult(BaseModel):
    """The whole breakdown of one evaluation; `reward` is in {-1, 1, 2, 3}."""

    task: str
    task_hash: str
    backend: str
    device: str = ""
    rules: str = Field(default="paper", description="the rules profile the evaluation ran under: 'paper' "
                       "(cuBLAS GEMM / cuDNN conv allowed) or 'strict' (no vendor library)")
    reward: int = -1
    compiled: bool = False
    correct: bool = False
    faster_than_eager: bool = False
    faster_than_compile: bool = False
    reason: str = ""
    stage: Stage = "done"
    load_step: LoadStep | None = Field(
        default=None, description="a load failure's step, as the candidate process reported it: importing "
        "model_new.py (with the language's artifact) and finding ModelNew, or constructing the model")
    time_ms: TimeMs = Field(default_factory=TimeMs)
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    speedup_interval: dict[str, list[float]] = Field(
        default_factory=dict, description="'eager' / 'compile': the speedup's confidence interval [low, high], from "
        "the same per-round ratios and order statistics that decide 'faster'")
    speedup_score: float = Field(default=-5.0, description="continuous: log2 speedup vs compile in [-4, 4]; -5 if incorrect")
    eager_stats: TimingStats | None = None
    compile_stats: TimingStats | None = None
    candidate_stats: TimingStats | None = None
    baseline_cached: bool = False
    calls_per_interval: int | None = Field(default=None, description="calls batched into one timed interval")
    trials: list[TrialCheck] = Field(default_factory=list)
    build: BuildResult | None = None
    findings: list[dict[str, Any]] = Field(default_factory=list, description="static check findings")
    flags: list[str] = Field(default_factory=list, description="guard observations: hidden work counted, re-measurements")
    sandbox: dict[str, Any] = Field(default_factory=dict, description="the worker's sandbox as applied (limits, Landlock, namespaces)")
    worker_log: str = Field(default="", description="tail of what the worker printed (untrusted)")
    seconds: float = 0.0
    phases: dict[str, float] = Field(default_factory=dict,
                                     description="seconds per stage: build, start, reference, verify, time")
    judge: dict[str, Any] = Field(default_factory=dict, description="the judge's own diagnosis: end-marker latencies "
                                  "and its device memory (needed, peak, kept after)")
    workloads: list[WorkloadResult] = Field(default_factory=list,
                                            description="per workload, when the task has more than one (else empty)")
    speedups: dict[str, SpeedupSummary] = Field(default_factory=dict,
                                                description="'eager' / 'compile': geometric and arithmetic mean and "
                                                "worst of the per-workload speedups (multi-workload tasks)")
