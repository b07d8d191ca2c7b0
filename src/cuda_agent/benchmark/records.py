"""Typed records of a benchmark run: one `TaskRecord` per finished (task, sample), one `RunInfo`
per run. A task that could not be evaluated is still a record, with a status and a reason, and
counts against the run; only `skipped` (this machine cannot run it) is left out of the metrics.
The headline metrics read each task's first sample (`primary`); pass@k reads them all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, Field

from ..evaluation import EvalConfig, EvalResult
from ..tasks import Task

Status = Literal["evaluated", "no_solution", "episode_failed", "harness_error", "skipped"]
# Statuses a resumed run tries again: the harness's fault, or this machine's (never the candidate's).
RETRIED = frozenset({"harness_error", "skipped"})
Mode = Literal["workspace", "single_file", "reference", "policy"]
T = TypeVar("T")
# How records written before EvalResult.load_step said that a single-file import failed.
_LEGACY_IMPORT_FAILURES = ("Error building extension", "defines no class ModelNew", "SyntaxError",
                           "CalledProcessError")


class Candidate(BaseModel):
    """A ready solution for one task: the files to put into a fresh workspace."""

    mode: Mode
    files: dict[str, str] = Field(default_factory=dict, description="workspace-relative path -> text")
    origin: str = Field(default="", description="where it came from (a path, 'examples', 'reference')")


class Job(BaseModel):
    """Everything a build or evaluation worker needs for one task; JSON-serialisable so it can
    travel to a subprocess or a Ray worker on another machine."""

    task: Task
    backend: str
    config: EvalConfig
    candidate: Candidate | None = None
    policy: str | None = Field(default=None, description="episode spec, for policy runs")
    policy_options: dict[str, Any] = Field(default_factory=dict)
    sample: int = Field(default=0, description="which sample of the task (pass@k runs evaluate several)")
    task_ends: bool = Field(default=True, description="no later job of this run evaluates the task: its evaluation "
                            "tells the judge to forget the task once answered (`EvalConfig.keep_task_warm`)")

    @property
    def key(self) -> str:
        """Unique per (task, sample): names the job's workspace folder."""
        return self.task.name if self.sample == 0 else f"{self.task.name}#sample{self.sample}"

    @property
    def mode(self) -> Mode:
        return "policy" if self.policy else (self.candidate.mode if self.candidate else "workspace")

    @property
    def origin(self) -> str:
        return self.policy or (self.candidate.origin if self.candidate else "")


class EpisodeInfo(BaseModel):
    """What a policy episode reports besides its final workspace."""

    tokens: int | None = None
    turns: int | None = None
    stop_reason: str = ""
    trajectory: str | None = Field(default=None, description="where the trajectory was saved, if anywhere")
    extra: dict[str, Any] = Field(default_factory=dict)


class TaskRecord(BaseModel):
    """One finished task of a run."""

    task: str
    level: int | None = None
    problem_id: int | None = None
    sample: int = 0
    task_hash: str = ""
    status: Status = "evaluated"
    reason: str = Field(default="", description="why there is no evaluation, when there is none")
    mode: Mode = "workspace"
    origin: str = ""
    result: EvalResult | None = None
    episode: EpisodeInfo | None = None
    slot: str = Field(default="", description="the pool slot that evaluated it (e.g. cuda:1, ray)")
    session: str = Field(default="", description="the driver invocation that produced it")
    attempts: int = 1
    wall_s: float = 0.0
    finished_at: str = Field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))

    # ---- the fields metrics read (a missing evaluation reads as a failure) --------------------
    @property
    def compiled(self) -> bool:
        """KernelBench's 'compiled': for a single-file solution, also that importing it (which
        runs its load_inline build) worked and defined ModelNew."""
        return bool(self.result and self.result.compiled) and self.compile_error is None

    @property
    def compile_error(self) -> str | None:
        """The compiler's (or importer's) message when the candidate did not compile."""
        res = self.result
        if res is None:
            return None
        if res.stage == "build" and not res.compiled:
            return (res.build.log if res.build and res.build.log else res.reason) or "build failed"
        # KernelBench: a single-file solution whose import fails (its load_inline build, a syntax
        # error) or that defines no ModelNew did not compile; one that fails to construct did
        if self.mode == "single_file" and res.stage == "load" and (
                res.load_step == "import" if res.load_step is not None  # records from before load_step: their text
                else any(m in res.reason for m in _LEGACY_IMPORT_FAILURES)):
            return res.reason
        return None

    @property
    def correct(self) -> bool:
        return bool(self.result and self.result.correct)

    @property
    def reward(self) -> int:
        return self.result.reward if self.result else -1

    @property
    def speedup_vs_eager(self) -> float | None:
        return self.result.speedup_vs_eager if self.correct and self.result else None

    @property
    def speedup_vs_compile(self) -> float | None:
        return self.result.speedup_vs_compile if self.correct and self.result else None

    @property
    def summary(self) -> str:
        """One line a person reads in a table."""
        text = self.reason if self.result is None else self.result.reason
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if not lines:
            return self.status if self.result is None else self.result.stage
        head = lines[0] if self.result is not None else f"{self.status}: {lines[0]}"
        if 'File "' in lines[0] and len(lines) > 1:  # a traceback: its last line says what happened
            head = f"{head.split(':', 1)[0]}: {lines[-1]}"
        return head

    @property
    def key(self) -> tuple[str, int]:
        return self.task, self.sample

    @classmethod
    def for_task(cls, task: Task, **fields: Any) -> TaskRecord:
        return cls(task=task.name, level=task.level, problem_id=task.problem_id, task_hash=task.content_hash,
                   **fields)

    @classmethod
    def for_job(cls, job: Job, **fields: Any) -> TaskRecord:
        return cls.for_task(job.task, sample=job.sample, mode=job.mode, origin=job.origin, **fields)


class RunInfo(BaseModel):
    """What a run is: kept in `run.json` beside the results, checked when a run resumes."""

    suite: str
    solutions: str = Field(default="", description="solutions spec, or '' for a policy run")
    policy: str | None = None
    backend: str
    config: EvalConfig
    tasks: list[str] = Field(default_factory=list, description="the suite's task names, in order")
    levels: dict[str, int | None] = Field(default_factory=dict, description="task name -> level")
    created_at: str = Field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))
    device: str = ""
    precision: str | None = Field(default=None, description="fp32 / fp16 / bf16 for every task, or None (as written)")
    samples: list[int] = Field(default_factory=lambda: [0], description="samples evaluated per task")
    subset: str | None = Field(default=None, description="curated subset name, if one was chosen")
    notes: dict[str, Any] = Field(default_factory=dict)

    def fingerprint(self) -> dict[str, Any]:
        """The parts that must match for a resumed run to continue the same measurement."""
        return {"suite": self.suite, "solutions": self.solutions, "policy": self.policy, "backend": self.backend,
                "config": self.config.model_dump(mode="json", exclude={"cache_dir", "prespawn_worker", "keep_task_warm"}),
                "tasks": self.tasks, "precision": self.precision, "samples": self.samples}


def primary(records: Iterable[TaskRecord]) -> dict[str, TaskRecord]:
    """Each task's record of its lowest-numbered sample (a later write of the same sample
    wins): what the headline metrics read."""
    out: dict[str, TaskRecord] = {}
    for r in records:
        old = out.get(r.task)
        if old is None or r.sample <= old.sample:
            out[r.task] = r
    return out


def by_sample(records: Iterable[TaskRecord]) -> dict[str, dict[int, TaskRecord]]:
    """task -> sample -> its latest record."""
    out: dict[str, dict[int, TaskRecord]] = {}
    for r in records:
        out.setdefault(r.task, {})[r.sample] = r
    return out


def by_level(items: Iterable[T], level: Callable[[T], int | None]) -> dict[int | None, list[T]]:
    """level -> its items in their order; levels ascending, tasks without a level last."""
    groups: dict[int | None, list[T]] = {}
    for item in items:
        groups.setdefault(level(item), []).append(item)
    return dict(sorted(groups.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)))


def scope_name(level: int | None) -> str:
    return f"level {level}" if level is not None else "no level"
