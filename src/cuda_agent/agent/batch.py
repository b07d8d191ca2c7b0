"""Batch runs: many episodes (tasks x samples), a worker per device slot, crash-safe resume.

Each finished episode is appended to `OUT/trajectories.jsonl` (the parent is its only writer); a
re-run skips finished episodes and retries the rest. With one worker, episodes share one policy
in this process; with more, each worker is a slot process (`backends.slots`) pinned to a device
with its own policy. A run holds `OUT/.lock`, and its workers die with it.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any, Callable, Sequence

from pydantic import BaseModel, Field

from ..backends import default_backend_name
from ..backends.devices import device_slots, spread
from ..backends.slots import LocalSlots, Outcome
from ..isolation.processes import RunLock
from ..tasks import Task
from .loop import AgentConfig, run_episode, slug
from .policies.base import Policy, PolicyConfig, PolicyError, make_policy
from .trajectory import TaskInfo, Trajectory, TrajectoryWriter, iter_trajectories, latest_by_episode, now_iso

TRAJECTORIES = "trajectories.jsonl"


def episode_id(task: Task, sample: int) -> str:
    """Stable across runs (the resume key): task name + content hash + sample index."""
    return f"{slug(task.name)}-{task.content_hash[:10]}-s{sample}"


class BatchSummary(BaseModel):
    """What a batch achieved, over the latest record of each of its episodes."""

    episodes: int
    finished: int
    failed: int = Field(description="episodes whose latest record is a policy or infrastructure error")
    skipped: int = Field(default=0, description="already finished before this run")
    rewards: dict[str, int] = Field(description="final reward -> count, finished episodes")
    best_rewards: dict[str, int] = Field(default_factory=dict)
    pass_rate: float = Field(description="share of finished episodes with final reward >= 1")
    faster_than_eager: float
    faster_than_compile: float
    geomean_speedup_vs_eager: float | None = None
    geomean_speedup_vs_compile: float | None = None
    mean_turns: float = 0.0
    tokens: int = 0

    @classmethod
    def of(cls, trajectories: Sequence[Trajectory], skipped: int = 0) -> "BatchSummary":
        done = [t for t in trajectories if t.finished]
        n = max(1, len(done))
        finals = [t.delivered for t in done if t.delivered is not None]  # the best state when the last is broken
        correct = [f for f in finals if f.reward >= 1]
        return cls(
            episodes=len(trajectories), finished=len(done), failed=len(trajectories) - len(done), skipped=skipped,
            rewards=_counts(t.final_reward for t in done), best_rewards=_counts(t.best_reward for t in done),
            pass_rate=len(correct) / n, faster_than_eager=sum(f.reward >= 2 for f in finals) / n,
            faster_than_compile=sum(f.reward >= 3 for f in finals) / n,
            geomean_speedup_vs_eager=_geomean([f.speedup_vs_eager for f in correct]),
            geomean_speedup_vs_compile=_geomean([f.speedup_vs_compile for f in correct]),
            mean_turns=statistics.fmean(len(t.turns) for t in done) if done else 0.0,
            tokens=sum(t.usage.total_tokens for t in trajectories))


def run_batch(tasks: Sequence[Task], policy: PolicyConfig | Policy, config: AgentConfig, out_dir: str | Path, *,
              samples: int = 1, workers: int = 1, devices: Sequence[str] | None = None,
              on_result: Callable[[Trajectory], None] | None = None,
              on_start: Callable[[int, int], None] | None = None) -> BatchSummary:
    """Run every (task, sample) episode not finished yet in `out_dir`; append each as it ends.
    `policy` is a PolicyConfig (built once per worker) or, with one worker, a ready Policy.
    `on_start(total, to_run)` and `on_result(trajectory)` drive progress displays."""
    if samples < 1 or workers < 1:
        raise ValueError("samples and workers must be >= 1")
    out = Path(out_dir)
    with RunLock(out, "optimize run"), TrajectoryWriter(out / TRAJECTORIES) as writer:  # the file's one writer
        path = writer.path
        previous = latest_by_episode(list(iter_trajectories(path, strict=False))) if path.exists() else {}
        jobs = [(task, s, episode_id(task, s)) for task in tasks for s in range(samples)]
        todo = [j for j in jobs if not (j[2] in previous and previous[j[2]].finished)]
        if on_start:
            on_start(len(jobs), len(todo))
        results: dict[str, Trajectory] = {eid: previous[eid] for _, _, eid in jobs if eid in previous}

        def record(traj: Trajectory) -> None:
            writer.append(traj)
            results[traj.episode_id] = traj
            if on_result:
                on_result(traj)

        if workers == 1 or len(todo) <= 1:
            _run_here(todo, policy, config, out, record)
        else:
            if isinstance(policy, Policy):
                raise ValueError("with several workers pass a PolicyConfig (each worker builds its own policy)")
            _run_pool(todo, policy, config, out, record, workers, devices)
    return BatchSummary.of([results[eid] for _, _, eid in jobs if eid in results], skipped=len(jobs) - len(todo))


class EpisodeWorkerDied(RuntimeError):
    """An episode's slot process died twice on it (out of memory, a crash in the model): recorded as the
    episode's error (not finished, so retried on resume)."""


Job = tuple[Task, int, str]  # task, sample, episode id


class _Episodes:
    """Plays episodes with one policy, built once (per slot process, or here): a policy that cannot be
    built (e.g. the local model cannot load) makes each episode a `policy_error` record, and the run goes on."""

    def __init__(self, policy: PolicyConfig | Policy, config: AgentConfig, out: Path) -> None:
        self.config, self.out, self.owned = config, out, not isinstance(policy, Policy)
        self.error: PolicyError | None = None
        try:
            self.policy = policy if isinstance(policy, Policy) else make_policy(policy)
        except PolicyError as exc:
            self.error = exc

    def __call__(self, job: Job) -> Trajectory:
        task, sample, eid = job
        if self.error is not None:
            traj = error_trajectory(task, sample, eid, self.config, self.error)
            traj.stop_reason = "policy_error"
            return traj
        try:
            return run_episode(task, self.policy, self.config, self.out / "episodes" / eid, episode_id=eid,
                               sample=sample)
        except Exception as exc:  # infrastructure (e.g. the workspace could not be made): recorded, retried later
            return error_trajectory(task, sample, eid, self.config, exc)

    def close(self) -> None:
        if self.owned and self.error is None:
            self.policy.close()


def _run_here(todo: list[Job], policy: PolicyConfig | Policy, config: AgentConfig, out: Path,
              record: Callable[[Trajectory], None]) -> None:
    if not todo:
        return
    episodes = _Episodes(policy, config, out)
    try:
        for job in todo:
            record(episodes(job))
    finally:
        episodes.close()


def _run_pool(todo: list[Job], policy: PolicyConfig, config: AgentConfig, out: Path,
              record: Callable[[Trajectory], None], workers: int, devices: Sequence[str] | None) -> None:
    """One slot process per worker, spread over `devices`, each with its own policy."""
    backend = config.backend or default_backend_name()
    slots = device_slots(backend, [int(d) for d in devices] if devices else None, cpu_slots=workers)

    def done(job: Job, outcome: Outcome[Trajectory]) -> None:
        task, sample, eid = job
        record(outcome.value if outcome.value is not None
               else error_trajectory(task, sample, eid, config, EpisodeWorkerDied(outcome.error)))

    LocalSlots(spread(slots, workers), out / "logs").run(todo, partial(_Episodes, policy, config, out), done)


def error_trajectory(task: Task, sample: int, eid: str, config: AgentConfig, exc: Exception) -> Trajectory:
    """The record of an episode that could not run at all (not finished: retried on resume)."""
    return Trajectory(episode_id=eid, sample=sample, backend=config.backend or "",
                      task=TaskInfo(name=task.name, content_hash=task.content_hash, level=task.level, origin=task.origin),
                      config=config.model_dump(mode="json"), started_at=now_iso(), finished_at=now_iso(),
                      stop_reason="error", error=f"{type(exc).__name__}: {exc}")


def _counts(values: Any) -> dict[str, int]:
    c = Counter(values)
    return {str(k): c[k] for k in sorted(c)}


def _geomean(xs: Sequence[float | None]) -> float | None:
    vals = [x for x in xs if x]
    return math.exp(statistics.fmean(math.log(x) for x in vals)) if vals else None


__all__ = ["run_batch", "BatchSummary", "EpisodeWorkerDied", "episode_id", "TRAJECTORIES"]
