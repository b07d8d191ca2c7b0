"""The typed records between the evaluator and the judge process: one request, one answer.

Why: both sides used to build and mutate dicts, so a renamed key failed silently on the other
side of a pipe. Each message is now validated where it arrives; what the judge measured for
diagnosis (probe latencies, device memory) travels in the same record as the verdict.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from .baselines import Baseline
from .config import EvalConfig
from .records import TrialCheck


class JudgeRequest(BaseModel):
    """One evaluation (or a baselines-only measurement) of one workload's source."""

    config: EvalConfig
    task_source: str
    task_hash: str
    precision: str | None = None
    atol: float | None = None
    rtol: float | None = None
    workspace: str
    library: str | None = None
    extension: str = ""
    cache_dir: str | None = None
    baseline_key: str = ""
    namespaces: bool = True
    filesystem: bool = True
    address_space_limit: int | None = None
    limits: dict[str, Any] = Field(default_factory=dict)
    baselines_only: bool = False
    sole_workload: bool = Field(default=True, description="this workload's decision is the reward's own. False "
                                "for one of a task's several workloads, judged together (`faster_over_workloads`, a "
                                "geometric mean: a workload not faster alone still counts): its rounds never end as "
                                "out of reach (`judge.futile`: ended early, it widened the joint interval), and its "
                                "baselines are always timed alone, since a slowed one counts in the joint claim "
                                "even where the workload is slower (two reviews of the fifteenth session)")


class ProbeStats(BaseModel):
    """Latency of the judge's end-of-interval marker (ms), kept as a diagnosis, never a verdict:
    three CUDA contexts share the GPU by time-slicing, so a slow marker is not proof of work."""

    calibration_ms: float = 0.0
    candidate: list[float] = Field(default_factory=list, description="after the candidate's intervals (a sample)")
    baseline: list[float] = Field(default_factory=list, description="after the baselines' intervals (a sample)")
    stops: dict[str, list[float]] = Field(default_factory=dict, description="on the CPU, per client role: [intervals, "
                                          "those run on to the client's stop, the most CPU it used from 'done' to "
                                          "its stop (us)] (`FrozenTree.stopped_at_once`)")


class MemoryStats(BaseModel):
    """The judge's own device memory (GiB): what the evaluation needed and what it kept."""

    estimate_gib: float = 0.0
    judge_peak_gib: float = 0.0
    judge_by_phase: dict[str, list[float]] = Field(default_factory=dict, description="per phase: the judge's "
                                                   "peak allocated and its reserved at the phase's end (GiB)")
    judge_held_after_gib: float = 0.0
    device_total_gib: float = 0.0


class JudgeAnswer(BaseModel):
    """The judge's verdict and evidence; `type` is "fault" when the trusted side failed."""

    type: Literal["result", "fault", "ready", "fatal"] = "result"
    message: str = ""
    device: str = ""
    phases: dict[str, float] = Field(default_factory=dict)
    flags: list[str] = Field(default_factory=list)
    trials: list[TrialCheck] = Field(default_factory=list)
    correct: bool = False
    stage: str | None = None
    reason: str | None = None
    load_step: str | None = None
    cached_baseline: Baseline | None = None
    work: dict[str, float] = Field(default_factory=dict)
    samples: dict[str, list[float]] | None = Field(default=None, description="per-call ms per round, interleaved")
    solo: dict[str, list[float]] = Field(default_factory=dict, description="per-call ms of the baselines timed "
                                         "with no candidate process alive, where it looked faster (every workload of several)")
    batch: int | None = None
    speed_of_light_ms: float | None = None
    sandbox: dict[str, Any] = Field(default_factory=dict)
    candidate_log: str = ""
    probes: ProbeStats = Field(default_factory=ProbeStats)
    clients: list[dict[str, Any]] = Field(default_factory=list, description="each client process taken: whether it "
                                          "had finished starting, its age and when in the evaluation it was taken (s)")
    spares_at_start: list[dict[str, Any]] = Field(default_factory=list, description="the spare clients alive when the "
                                                  "evaluation began: age (s), whether started")
    memory: MemoryStats = Field(default_factory=MemoryStats)
