"""The Ray pool (the `ray` extra): the same two stages as the local pool, as Ray tasks.

Build tasks take one CPU each; evaluation tasks are `RaySlots` tasks (one GPU each, one CPU
on the cpu backend), so Ray runs one evaluation per GPU and fills the remaining CPUs with
builds. Every task lays its workspace out in node-local scratch space from the job it was
sent (nothing is assumed shared); point CUDA_AGENT_CACHE at a shared file system to let GPU
nodes reuse what CPU nodes built, otherwise a GPU node rebuilds (correct, slower). The
driver alone appends records, as each task finishes; Ray retries tasks whose worker died.
"""

from __future__ import annotations

import tempfile
from functools import partial
from pathlib import Path

from ..backends.slots import RaySlots, stateless
from .jobs import build_stage, device_stage, workspace_dirname
from .local_pool import OnRecord, after_builds, device_record, serialised
from .records import Job, TaskRecord


def _scratch(run_id: str, task_name: str) -> Path:
    return Path(tempfile.gettempdir()) / "cuda-agent-bench" / run_id / workspace_dirname(task_name)


def _remote_build(job: Job, run_id: str) -> TaskRecord | None:
    return build_stage(job, _scratch(run_id, job.key))


def _remote_device(run_id: str, job: Job) -> TaskRecord:
    return device_stage(job, _scratch(run_id, job.key))


class RayPool:
    """Fan the build and device stages out over a Ray cluster (or a local one it starts)."""

    def __init__(self, backend: str, address: str | None = None, num_cpus: int | None = None) -> None:
        self.slots = RaySlots(backend, address, num_cpus)

    def run(self, jobs: list[Job], workdir: Path, on_record: OnRecord) -> None:
        record = serialised(on_record)
        run_id = workdir.resolve().as_posix().replace("/", "_")[-60:]
        self.slots.ray()  # connect first: a missing `ray` extra is said before any work starts
        ready = after_builds(jobs, lambda job: self.slots.on_cpu(_remote_build, job, run_id), record, "ray:build")
        self.slots.run(ready, stateless(partial(_remote_device, run_id)), partial(device_record, record))
