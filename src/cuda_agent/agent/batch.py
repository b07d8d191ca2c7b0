"""Batch runs: many episodes (tasks x samples), a worker per device slot, crash-safe resume.

Every finished episode is appended to `OUT/trajectories.jsonl` as it completes (the parent is the
only writer); a re-run skips episodes whose latest record finished and retries the rest (policy
or infrastructure errors). Episode folders live in `OUT/episodes/<id>/` (workspace + best state).
With one worker, episodes run in this process and share one policy (a local model loads once);
with more, each worker process owns one device slot (`CUDA_VISIBLE_DEVICES`) and its own policy.
Each episode journals its turns (`episodes/<id>/journal.jsonl`), so an episode cut short by a
crash resumes mid-way. A run holds `OUT/.lock` while it runs (a second run on the same folder is
refused), and its worker processes die with it, on SIGKILL too (`cuda_agent.isolation.processes`).
"""

from __future__ import annotations

import math
import os
import statistics
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Callable, Sequence

from pydantic import BaseModel, Field

from ..isolation.processes import RunLock, die_with_parent
from ..tasks import Task
from .loop import AgentConfig, run_episode
from .policies.base import Policy, PolicyConfig, PolicyError, make_policy
from .trajectory import TaskInfo, Trajectory, TrajectoryWriter, iter_trajectories, latest_by_episode, now_iso

TRAJECTORIES = "trajectories.jsonl"


def episode_id(task: Task, sample: int) -> str:
    """Stable across runs (the resume key): task name + content hash + sample index."""
    slug = "".join(c if c.isalnum() or c in "-_." else "_" for c in task.name)[-60:]
    return f"{slug}-{task.content_hash[:10]}-s{sample}"


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
    with RunLock(out, "optimize run"):
        return _run_batch(tasks, policy, config, out, samples, workers, devices, on_result, on_start)


def _run_batch(tasks: Sequence[Task], policy: PolicyConfig | Policy, config: AgentConfig, out: Path, samples: int,
               workers: int, devices: Sequence[str] | None, on_result: Callable[[Trajectory], None] | None,
               on_start: Callable[[int, int], None] | None) -> BatchSummary:
    path = out / TRAJECTORIES
    with TrajectoryWriter(path) as writer:  # one writer holds the file; closed even when a worker dies
        return _run_batch_with(tasks, policy, config, out, samples, workers, devices, on_result, on_start, writer)


def _run_batch_with(tasks: Sequence[Task], policy: PolicyConfig | Policy, config: AgentConfig, out: Path,
                    samples: int, workers: int, devices: Sequence[str] | None,
                    on_result: Callable[[Trajectory], None] | None, on_start: Callable[[int, int], None] | None,
                    writer: TrajectoryWriter) -> BatchSummary:
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
    """An episode worker process died (out of memory, a crash in the model); finished episodes are saved."""


def _run_here(todo: list[tuple[Task, int, str]], policy: PolicyConfig | Policy, config: AgentConfig, out: Path,
              record: Callable[[Trajectory], None]) -> None:
    if not todo:
        return
    try:
        built = policy if isinstance(policy, Policy) else make_policy(policy)
    except PolicyError as exc:  # e.g. the local model cannot load: each episode says so, and the run goes on
        for task, sample, eid in todo:
            traj = error_trajectory(task, sample, eid, config, exc)
            traj.stop_reason = "policy_error"
            record(traj)
        return
    try:
        for task, sample, eid in todo:
            try:
                traj = run_episode(task, built, config, out / "episodes" / eid, episode_id=eid, sample=sample)
            except Exception as exc:  # infrastructure (e.g. the workspace could not be made): recorded, retried later
                traj = error_trajectory(task, sample, eid, config, exc)
            record(traj)
    finally:
        if not isinstance(policy, Policy):
            built.close()


def _run_pool(todo: list[tuple[Task, int, str]], policy: PolicyConfig, config: AgentConfig, out: Path,
              record: Callable[[Trajectory], None], workers: int, devices: Sequence[str] | None) -> None:
    ctx = get_context("spawn")
    slots = ctx.Queue()
    for i in range(workers):
        slots.put(devices[i % len(devices)] if devices else None)
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker,
                               initargs=(slots, policy.model_dump_json(), os.getpid()))
    try:
        pending: set[Future[str]] = {pool.submit(_worker_episode, t.model_dump_json(), s, eid, config.model_dump_json(),
                                                 str(out / "episodes" / eid)) for t, s, eid in todo}
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                try:
                    record(Trajectory.model_validate_json(fut.result()))
                except BrokenProcessPool as exc:
                    raise EpisodeWorkerDied("a worker process died (out of memory, or a crash in the model); finished "
                                       "episodes are saved: re-run the same command to resume") from exc
    except BaseException:  # Ctrl-C, SIGTERM, a dead worker: stop the others now, not after their episodes
        for proc in list(getattr(pool, "_processes", {}).values()):
            proc.kill()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


_WORKER: dict[str, Any] = {}


def _init_worker(slots: Any, policy_json: str, parent: int) -> None:
    die_with_parent(parent)  # a killed run leaves no worker (and, through theirs, no tool process) behind
    device = slots.get()
    if device is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(device)
    _WORKER["policy"] = make_policy(PolicyConfig.model_validate_json(policy_json))


def _worker_episode(task_json: str, sample: int, eid: str, config_json: str, workdir: str) -> str:
    task, config = Task.model_validate_json(task_json), AgentConfig.model_validate_json(config_json)
    try:
        traj = run_episode(task, _WORKER["policy"], config, workdir, episode_id=eid, sample=sample)
    except Exception as exc:
        traj = error_trajectory(task, sample, eid, config, exc)
    return traj.model_dump_json()


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
