"""Parent side of the data worker: a subprocess that runs generated or third-party task code.

Task code is untrusted, so it never runs in the caller's process: the worker is sandboxed and
watched like the evaluation's own children (`isolation/worker.py`), serves many requests (torch
and the device start once) and is replaced after a crash, a timeout or `max_requests`.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from ..backends import HOST_BACKEND
from ..isolation.processes import PDEATHSIG_PREFIX, child_environment
from ..isolation.worker import CHANNEL_FD, WorkerDied, WorkerProcess
from ..isolation.sandbox import NAMESPACE_PREFIX, make_scratch, namespaces_available, scrubbed_environment

__all__ = ["DataWorker", "WorkerDied", "WorkerError", "run_jobs"]
Job = TypeVar("Job")


def _default_memory_limit() -> int:
    """Half the machine's memory: one runaway task must not take the host down."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (ValueError, OSError):
        return 16 << 30


class WorkerError(Exception):
    """The worker ran the request but reported an error (`stage`, readable `message`)."""

    def __init__(self, stage: str, message: str):
        super().__init__(f"{stage}: {message}")
        self.message = message


class DataWorker(WorkerProcess):
    """One data worker process; `request` sends a JSON request and waits for its reply.
    `WorkerProcess` does the rest; only the start differs (module, thread count, isolation)."""

    def __init__(self, backend: str = HOST_BACKEND, *, isolate: bool = True, memory_limit_gb: float | None = None,
                 threads: int | None = None, max_requests: int = 500, extra_env: dict[str, str] | None = None):
        self.backend = backend
        self.max_requests = max_requests
        self.requests = 0
        self.died = False
        env = child_environment()
        extra = dict(extra_env or {})
        if threads:
            extra.update({"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)})
        extra["CUDA_AGENT_DATA_ISOLATE"] = "1" if isolate else "0"
        scratch = make_scratch(Path(tempfile.mkdtemp(prefix="cuda-agent-data-")))
        super().__init__(
            [*PDEATHSIG_PREFIX,  # dies with us, on SIGKILL too
             *(NAMESPACE_PREFIX if isolate and namespaces_available() else ()),
             sys.executable, "-m", "cuda_agent.data.worker", CHANNEL_FD, backend],
            env=scrubbed_environment(env, scratch, extra), scratch=scratch, log_prefix="cuda-agent-data-",
            memory_limit_bytes=int(memory_limit_gb * 2**30) if memory_limit_gb else _default_memory_limit(),
            dies_with_parent=False)

    def send(self, message: dict[str, Any] | str) -> None:
        self.command(message if isinstance(message, str) else json.dumps(message))

    def receive(self, timeout_s: float) -> dict[str, Any]:  # type: ignore[override]
        """The next reply; WorkerDied on timeout, crash or limit; WorkerError if it reported one."""
        try:
            reply = self.receive_by(time.monotonic() + timeout_s, f"timed out after {timeout_s:.0f} s")
        except WorkerDied:
            self.died = True
            raise
        if reply.get("type") == "error":
            raise WorkerError(str(reply.get("stage", "worker")), str(reply.get("message", "")))
        return reply

    def request(self, message: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        self.requests += 1
        self.send(message)
        return self.receive(timeout_s)

    @property
    def worn_out(self) -> bool:
        return self.requests >= self.max_requests or self.died or not self.alive()

    def __enter__(self) -> "DataWorker":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def run_jobs(jobs: Iterable[Job], slots: int, start: Callable[[int], DataWorker],
             run: Callable[[int, DataWorker, Job], bool | None]) -> None:
    """`run(slot, worker, job)` for every job, on `slots` threads with a worker each (`start(slot)`);
    a worker worn out or dead is replaced before the next job. A slot stops when `run` says False."""
    it, lock, end = iter(jobs), threading.Lock(), object()

    def loop(slot: int) -> None:
        worker: DataWorker | None = None
        try:
            while True:
                with lock:
                    job = next(it, end)
                if job is end:
                    return
                if worker is None or worker.worn_out:
                    if worker is not None:
                        worker.close()
                    worker = start(slot)
                if run(slot, worker, job) is False:  # type: ignore[arg-type]
                    return
        finally:
            if worker is not None:
                worker.close()

    threads = [threading.Thread(target=loop, args=(k,), daemon=True) for k in range(max(1, slots))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
