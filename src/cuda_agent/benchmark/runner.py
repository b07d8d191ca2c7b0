"""`run_benchmark`: a suite, a source of candidates (solutions or a policy), a pool, a store.

It reads top to bottom: describe the run (or check that the directory holds the same run),
skip every task that already has a record, turn the rest into jobs (a task without a
solution is recorded as such at once), and hand the jobs to a pool that reports each record
as it finishes; the store appends it durably before anything else happens.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from ..evaluation import EvalConfig
from .records import RETRIED, Job, RunInfo, TaskRecord
from .suite import unmet_requirements
from .solutions import SolutionError, SolutionSource
from .store import ResultStore
from .suite import Suite


class Pool(Protocol):
    def run(self, jobs: list[Job], workdir: Path, on_record: Callable[[TaskRecord], None]) -> None: ...


def run_benchmark(suite: Suite, out: str | Path, pool: Pool, *, backend: str, config: EvalConfig,
                  solutions: SolutionSource | None = None, policy: str | None = None,
                  policy_options: dict[str, Any] | None = None, fresh: bool = False, retry_errors: bool = True,
                  samples: Sequence[int] = (0,),
                  on_record: Callable[[TaskRecord], None] | None = None) -> list[TaskRecord]:
    """Run (or resume) the benchmark in `out`; return the latest record of every task done.

    Exactly one of `solutions` and `policy` is given; `samples` lists the samples evaluated per
    task (pass@k). A task this machine cannot run (`suite.unmet_requirements`) is recorded as
    `skipped`. Records of status `harness_error` or `skipped` are tried again on resume when
    `retry_errors` (a candidate's own failure never is). The run holds
    `out/.lock` (`cuda_agent.isolation.processes.RunLock`): a second run on the same folder is refused."""
    from ..isolation.processes import RunLock

    if (solutions is None) == (policy is None):
        raise ValueError("give either solutions or a policy")
    if not samples:
        raise ValueError("samples must name at least one sample")
    with RunLock(out, "benchmark run"):
        config = config.model_copy(update={"backend": backend})
        store = ResultStore(out)
        store.begin(RunInfo(suite=suite.spec, solutions=solutions.spec if solutions else "", policy=policy,
                            backend=backend, config=config, tasks=[t.name for t in suite.tasks],
                            levels=suite.levels(), precision=suite.precision, samples=list(samples),
                            subset=suite.subset), fresh=fresh)
        done = {key for key, r in store.latest().items() if not (retry_errors and r.status in RETRIED)}
        session = uuid.uuid4().hex[:10]

        def record(r: TaskRecord) -> None:
            r = r.model_copy(update={"session": session})
            store.append(r)
            if on_record is not None:
                on_record(r)

        jobs: list[Job] = []
        for task in suite.tasks:
            unmet = unmet_requirements(task)
            for sample in samples:
                if (task.name, sample) in done:
                    continue
                if unmet:  # this machine cannot run the task at all: listed, not charged to the candidate
                    record(TaskRecord.for_task(task, sample=sample, status="skipped", reason=unmet))
                    continue
                if policy is not None:
                    jobs.append(Job(task=task, backend=backend, config=config, policy=policy,
                                    policy_options=policy_options or {}, sample=sample))
                    continue
                assert solutions is not None
                try:
                    candidate = solutions.candidate(task, backend, sample)
                    if candidate is None:
                        raise SolutionError(f"no solution for {task.name} (sample {sample}) in {solutions.spec}")
                except SolutionError as exc:
                    record(TaskRecord.for_task(task, sample=sample, status="no_solution", reason=str(exc)))
                    continue
                jobs.append(Job(task=task, backend=backend, config=config, candidate=candidate, sample=sample))
        seen: set[str] = set()
        for i in reversed(range(len(jobs))):  # a task's jobs before its last keep its judge state warm
            jobs[i] = jobs[i].model_copy(update={"task_ends": jobs[i].task.name not in seen})
            seen.add(jobs[i].task.name)
        if jobs:
            pool.run(jobs, Path(out) / "workspaces", record)
        latest = store.latest()
        return [latest[(t.name, s)] for t in suite.tasks for s in samples if (t.name, s) in latest]
