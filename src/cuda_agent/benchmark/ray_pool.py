"""The Ray pool (the `ray` extra): the same two stages as the local pool, as Ray tasks.

Build tasks take one CPU each; evaluation tasks take one GPU each (one CPU on the cpu
backend), so Ray runs one evaluation per GPU and fills the remaining CPUs with builds.
Every task lays its workspace out in node-local scratch space from the job it was sent
(nothing is assumed shared); point CUDA_AGENT_CACHE at a shared file system to let GPU
nodes reuse what CPU nodes built, otherwise a GPU node rebuilds (correct, slower). The
driver alone appends records, as each task finishes; Ray retries tasks whose worker died.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .jobs import build_stage, device_stage, workspace_dirname
from .records import Job, TaskRecord

OnRecord = Callable[[TaskRecord], None]


def _scratch(run_id: str, task_name: str) -> Path:
    return Path(tempfile.gettempdir()) / "cuda-agent-bench" / run_id / workspace_dirname(task_name)


def _remote_build(job_json: str, run_id: str) -> str | None:
    job = Job.model_validate_json(job_json)
    record = build_stage(job, _scratch(run_id, job.key))
    return None if record is None else record.model_dump_json()


def _remote_device(job_json: str, run_id: str) -> str:
    import os

    job = Job.model_validate_json(job_json)
    record = device_stage(job, _scratch(run_id, job.key))
    gpus = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    return record.model_copy(update={"slot": f"ray:{gpus or 'cpu'}"}).model_dump_json()


class RayPool:
    """Fan the build and device stages out over a Ray cluster (or a local one it starts)."""

    def __init__(self, backend: str, address: str | None = None, num_cpus: int | None = None,
                 max_retries: int = 2, init_kwargs: dict[str, Any] | None = None) -> None:
        self.backend = backend
        self.address = address
        self.num_cpus = num_cpus
        self.max_retries = max_retries
        self.init_kwargs = init_kwargs or {}

    def run(self, jobs: list[Job], workdir: Path, on_record: OnRecord) -> None:
        try:
            import ray
        except ImportError:
            raise RuntimeError("the Ray pool needs the `ray` extra: pip install 'cuda-agent[ray]'") from None
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, **self.init_kwargs}
            if self.address:
                kwargs["address"] = self.address
            elif self.num_cpus:
                kwargs["num_cpus"] = self.num_cpus
            ray.init(**kwargs)
        run_id = workdir.resolve().as_posix().replace("/", "_")[-60:]
        build = ray.remote(num_cpus=1, max_retries=self.max_retries)(_remote_build)
        if self.backend == "cuda":
            device = ray.remote(num_gpus=1, num_cpus=1, max_retries=self.max_retries)(_remote_device)
        else:
            device = ray.remote(num_cpus=1, max_retries=self.max_retries)(_remote_device)

        pending: dict[Any, tuple[str, Job]] = {}
        for job in jobs:
            payload = job.model_dump_json()
            ref = (device if job.policy else build).remote(payload, run_id)
            pending[ref] = ("device" if job.policy else "build", job)
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            ref = done[0]
            stage, job = pending.pop(ref)
            try:
                out = ray.get(ref)
            except Exception as exc:  # the task raised or its worker kept dying: recorded, not raised
                on_record(TaskRecord.for_task(job.task, sample=job.sample, mode=job.mode, status="harness_error",
                                              slot="ray", reason=f"ray {stage} task failed: {exc}"[:4000]))
                continue
            if stage == "build" and out is None:
                pending[device.remote(job.model_dump_json(), run_id)] = ("device", job)
            elif out is not None:
                record = TaskRecord.model_validate_json(out)
                on_record(record if stage == "device" else record.model_copy(update={"slot": "ray:build"}))
