"""The local pool: CPU build workers feeding one evaluation slot per device.

As in the paper's design, compilation and evaluation are separate pools: a thread pool runs
the build stage (static checks + build; compilers are subprocesses, so threads suffice), and
each device has one slot process (`cuda_agent.backends.slots`) that runs evaluations one at a
time, so no two timings share a GPU. A slot that dies is restarted and its job retried once;
a second death is recorded as a `harness_error` with the tail of the slot's log.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from functools import partial
from pathlib import Path

from ..backends.devices import SlotSpec, device_slots  # noqa: F401  (device_slots: re-exported with the pool)
from ..backends.slots import LocalSlots, Outcome
from .jobs import build_stage, device_stage, workspace_dirname
from .records import Job, TaskRecord

OnRecord = Callable[[TaskRecord], None]


class LocalPool:
    """Build workers + one evaluation slot per device, on this machine."""

    def __init__(self, slots: list[SlotSpec], build_workers: int = 2, log_dir: Path | None = None) -> None:
        if not slots:
            raise ValueError("the local pool needs at least one evaluation slot")
        self.slots = slots
        self.build_workers = max(1, build_workers)
        self.log_dir = log_dir

    def run(self, jobs: list[Job], workdir: Path, on_record: OnRecord) -> None:
        record = serialised(on_record)
        with ThreadPoolExecutor(self.build_workers, thread_name_prefix="build") as builds:
            ready = after_builds(jobs, lambda job: builds.submit(build_stage, job, workdir / workspace_dirname(job.key)),
                                 record, "build")
            backends = sorted({job.backend for job in jobs})
            LocalSlots(self.slots, self.log_dir or workdir / "logs").run(
                ready, partial(_device_worker, workdir, backends), partial(device_record, record))


def after_builds(jobs: list[Job], build: Callable[[Job], Future[TaskRecord | None]], record: OnRecord,
                 slot: str) -> Iterator[Job]:
    """The jobs that go on to the device stage, as their builds finish (policy jobs at once); a
    candidate its build finished (it failed a check or to build) is recorded under `slot`."""
    futures = {build(job): job for job in jobs if not job.policy}
    yield from (job for job in jobs if job.policy)
    for fut in as_completed(futures):
        job = futures[fut]
        try:
            done = fut.result()
        except Exception as exc:  # the build task itself failed (e.g. its Ray worker kept dying): recorded
            record(TaskRecord.for_job(job, status="harness_error", slot=slot,
                                      reason=f"{slot} task failed: {exc}"[:4000]))
            continue
        if done is None:
            yield job
        else:
            record(done.model_copy(update={"slot": slot}))


def device_record(record: OnRecord, job: Job, outcome: Outcome[TaskRecord]) -> None:
    """Record a device stage's outcome: its record, labelled with the slot, or a `harness_error`."""
    if outcome.value is not None:
        record(outcome.value.model_copy(update={"slot": outcome.slot, "attempts": outcome.attempts}))
    else:
        record(TaskRecord.for_job(job, status="harness_error", slot=outcome.slot, attempts=outcome.attempts,
                                  reason=outcome.error or ""))


def serialised(on_record: OnRecord) -> OnRecord:
    """`on_record` called by one thread at a time (builds and slots report concurrently)."""
    lock = threading.Lock()

    def record(r: TaskRecord) -> None:
        with lock:
            on_record(r)

    return record


def _device_worker(workdir: Path, backends: list[str]) -> Callable[[Job], TaskRecord]:
    """A slot's work function, its device's judge started first: as in a long-lived harness,
    the first job's time is its own, not the judge's start (its fault, if any, is the first
    job's to report)."""
    from ..evaluation.judge_client import get_judge

    for backend in backends:
        try:
            get_judge(backend)
        except Exception:  # noqa: BLE001 - the first evaluation starts it again and says why
            pass
    return partial(_device_in, workdir)


def _device_in(workdir: Path, job: Job) -> TaskRecord:
    return device_stage(job, workdir / workspace_dirname(job.key))
