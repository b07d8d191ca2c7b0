"""The service's wire format: typed requests and responses (they make its OpenAPI schema).

Only what a client may choose is here; the backend, the guards and the memory limit are the
server's (`ServeConfig`), so no client can switch the anti-hacking checks off."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..evaluation import EvalConfig, EvalResult, is_candidate_path

Status = Literal["queued", "running", "done", "failed"]


class TaskSpec(BaseModel):
    """Which task: a name the server knows (a bundled example such as `swish`, or a task of the
    server's `--tasks`), or a KernelBench-format source sent with the request."""

    model_config = ConfigDict(extra="forbid")
    name: str | None = Field(default=None, max_length=256, description="a task the server knows, e.g. 'swish'")
    source: str | None = Field(default=None, description="a KernelBench-format task file's text")

    @model_validator(mode="after")
    def _one_of(self) -> "TaskSpec":
        if (self.name is None) == (self.source is None):
            raise ValueError("give exactly one of task.name and task.source")
        return self


class EvalOptions(BaseModel):
    """Evaluation options a client may set; None keeps the server's default (`EvalConfig.from_options`)."""

    model_config = ConfigDict(extra="forbid")
    measure: bool = Field(default=True, description="False: build and verify only (reward 1 if correct)")
    trials: int | None = Field(default=None, ge=1, le=20, description="correctness checks on fresh inputs")
    compile_baseline: bool = Field(default=True, description="also time torch.compile (needed for reward 3)")
    tolerance: Literal["paper", "kernelbench"] | None = None
    atol: float | None = Field(default=None, gt=0, le=1)
    rtol: float | None = Field(default=None, gt=0, le=1)
    timeout_s: float | None = Field(default=None, gt=0, description="this request's time limit for the evaluation "
                                    "(capped by the server's --max-timeout)")
    timing_budget_s: float | None = Field(default=None, gt=0, le=60)
    min_rounds: int | None = Field(default=None, ge=3, le=2000)
    warmup_ms: float | None = Field(default=None, ge=0, le=10_000)

    @field_validator("atol", "rtol", "timeout_s", "timing_budget_s", "warmup_ms")
    @classmethod
    def _finite(cls, v: float | None) -> float | None:
        if v is not None and not math.isfinite(v):
            raise ValueError("must be a finite number")
        return v

    @classmethod
    def from_config(cls, config: EvalConfig) -> "EvalOptions":
        """The options a client can send that mean `config` (guards and limits stay the server's)."""
        t = config.timing
        return cls(measure=config.measure, trials=config.trials, compile_baseline=config.compile_mode is not None,
                   tolerance=config.tolerance, atol=config.atol, rtol=config.rtol, timeout_s=config.worker_timeout_s,
                   timing_budget_s=t.budget_s, min_rounds=t.min_trials, warmup_ms=t.warmup_ms)

    def to_config(self, backend: str, max_timeout_s: float, memory_limit_gb: float) -> EvalConfig:
        """The one config builder (`EvalConfig.from_options`), with the server's limits applied."""
        timeout = min(self.timeout_s or max_timeout_s, max_timeout_s)
        return EvalConfig.from_options(backend, measure=self.measure, trials=self.trials,
                                       compile_baseline=self.compile_baseline, atol=self.atol, rtol=self.rtol,
                                       tolerance=self.tolerance, timeout_s=timeout, memory_limit_gb=memory_limit_gb,
                                       timing_budget_s=self.timing_budget_s, min_rounds=self.min_rounds,
                                       warmup_ms=self.warmup_ms)


def check_candidate_files(files: dict[str, str]) -> dict[str, str]:
    """Only the candidate's paths (the evaluator's own rule), and model_new.py among them."""
    bad = [p for p in files if not is_candidate_path(p)]
    if bad:
        raise ValueError(f"not a candidate path: {', '.join(sorted(bad)[:5])} (allowed: model_new.py, kernels/<name>)")
    if "model_new.py" not in files:
        raise ValueError("missing file: model_new.py")
    return files


class EvalRequest(BaseModel):
    """One evaluation: a task, the candidate's files (`model_new.py` and `kernels/<name>`), options."""

    model_config = ConfigDict(extra="forbid")
    task: TaskSpec
    files: dict[str, str] = Field(description="path -> text: model_new.py and kernels/<file> only")
    options: EvalOptions = Field(default_factory=EvalOptions)

    @field_validator("files")
    @classmethod
    def _files(cls, files: dict[str, str]) -> dict[str, str]:
        return check_candidate_files(files)


class BatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    items: list[EvalRequest] = Field(min_length=1, max_length=1024)


class Evaluation(BaseModel):
    """One accepted request and, once it is done, its result. `id` is the content hash of the
    task, the files and the effective config: the same submission gets the same id and result."""

    id: str
    status: Status
    task: str
    created_at: float
    started_at: float | None = None
    finished_at: float | None = None
    runs: int = Field(default=0, description="times a worker took it (a slot that died mid-run retries once)")
    slot: str | None = None
    error: str | None = Field(default=None, description="why it failed without a verdict (status 'failed')")
    result: EvalResult | None = None
    cached: bool = Field(default=False, description="this submission was answered by an earlier identical one")

    @property
    def reward(self) -> int | None:
        return self.result.reward if self.result else None


class BatchResponse(BaseModel):
    evaluations: list[Evaluation]


class DeviceState(BaseModel):
    label: str
    completed: int = 0
    failed: int = 0
    busy_seconds: float = 0.0
    utilisation: float = Field(default=0.0, description="busy seconds / seconds since the service started")
    last_finished_at: float | None = None


class Health(BaseModel):
    status: Literal["ok"] = "ok"
    backend: str
    pool: str
    slots: int
    queue_depth: int = Field(description="accepted and not yet taken by a worker")
    running: int
    max_queue: int
    uptime_s: float
    counts: dict[str, int] = Field(description="stored evaluations by status")
    latency_p50_s: float | None = None
    latency_p99_s: float | None = None
    throughput_per_s: float | None = Field(default=None, description="evaluations finished per second, last 5 minutes")


class ErrorBody(BaseModel):
    detail: Any


class EpisodeReset(BaseModel):
    """OpenEnv-style `reset`: start a workspace episode on a task."""

    model_config = ConfigDict(extra="forbid")
    task: TaskSpec
    options: EvalOptions = Field(default_factory=EvalOptions)
    max_steps: int = Field(default=10, ge=1, le=200)


class EpisodeStep(BaseModel):
    """OpenEnv-style `step`: the action is the candidate's files; the observation is their evaluation."""

    model_config = ConfigDict(extra="forbid")
    episode_id: str
    files: dict[str, str]
    wait_s: float = Field(default=600.0, gt=0, le=3600)

    @field_validator("files")
    @classmethod
    def _files(cls, files: dict[str, str]) -> dict[str, str]:
        return check_candidate_files(files)


class EpisodeState(BaseModel):
    episode_id: str
    task: str
    step_count: int
    max_steps: int
    done: bool
    last_reward: float | None = None
    evaluation_ids: list[str] = Field(default_factory=list)


class ResetResponse(BaseModel):
    episode_id: str
    observation: dict[str, str] = Field(description="the workspace's files the agent reads (SKILL.md, model.py, "
                                        "the starter model_new.py)")
    state: EpisodeState


class StepResponse(BaseModel):
    observation: Evaluation
    reward: float
    done: bool
    state: EpisodeState


__all__ = ["BatchRequest", "BatchResponse", "DeviceState", "EpisodeReset", "EpisodeState", "EpisodeStep",
           "ErrorBody", "EvalOptions", "EvalRequest", "Evaluation", "Health", "ResetResponse", "Status",
           "StepResponse", "TaskSpec"]
