"""The reward service's core, without HTTP: admit requests, store them, run them on a pool of
judges, store the verdicts.

    submit ─► content hash ─► stored? answer it ─► else: bounded? 429 ─► SQLite row (queued)
                                                                          │ in-memory queue of ids
    Slots.run(jobs, run_job, on_result)  ◄────────────────────────────────┘
      LocalSlots: one slot process per device / CPU slot, a dead one restarted and its job retried
      RaySlots:   Ray tasks, one GPU each, across the cluster (Ray retries)
    on_result ─► SQLite row (done | failed) ─► listeners (HTTP waiters), metrics

The scheduler is the project's (`backends/slots.py`); this module only feeds it. A restart
recovers from the store: queued rows run, rows that were running are failed explicitly
(`Store.recover`), so nothing accepted is lost and nothing is run twice unasked.
"""

from __future__ import annotations

import hashlib
import json
import math
import queue
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..backends.devices import device_slots
from ..backends.slots import LocalSlots, Outcome, RaySlots, Slots, stateless
from ..evaluation import EvalResult
from ..tasks import Task, TaskError, load_tasks
from .metrics import Metrics
from .models import DeviceState, EvalRequest, Evaluation, Health
from .store import Store
from .worker import run_job


_PARSE = threading.Lock()
"""Task sources are parsed one at a time: CPython 3.11's AST constructor keeps its recursion depth in
state shared by threads, and two `ast.parse` at once in the HTTP thread pool raised `SystemError: AST
constructor recursion depth mismatch` (a 500, 1 request in 1,000 of bench/serve_load.py; cpython
gh-106905)."""


def _local_backend() -> str:
    from ..backends import default_backend_name

    return default_backend_name()


class ServeConfig(BaseModel):
    """What the server decides (a client cannot): where it stores, what it runs on, its limits."""

    db: Path = Field(default=Path("serve.sqlite"), description="the SQLite store of requests and results")
    backend: str = Field(default_factory=lambda: _local_backend(), description="'cuda' or 'cpu' (default: the local "
                         "device)")
    pool: Literal["local", "ray"] = Field(default="local", description="local: slot processes on this machine; "
                                          "ray: Ray tasks, one GPU each, across a cluster")
    slots: int = Field(default=1, ge=1, description="CPU slots (a GPU backend: one per visible device)")
    devices: list[int] | None = Field(default=None, description="GPU indices to use (default: all visible)")
    ray_address: str | None = None
    max_queue: int = Field(default=256, ge=1, description="accepted requests waiting for a judge; beyond: 429")
    max_timeout_s: float = Field(default=600.0, gt=0, description="cap on a request's evaluation time limit")
    memory_limit_gb: float = Field(default=16.0, gt=0)
    max_file_bytes: int = Field(default=256 * 1024, ge=1, description="largest candidate file or task source")
    max_files: int = Field(default=64, ge=1)
    tasks: list[str] = Field(default_factory=list, description="task sources (files, folders, tables) known by name, "
                             "besides the bundled examples")
    log_dir: Path | None = Field(default=None, description="slot logs (default: next to the store)")


class ServeError(Exception):
    """A request the service refuses; `status` is the HTTP status it maps to."""

    status = 422

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status


class Busy(ServeError):
    """The bounded queue is full: try again after `retry_after` seconds."""

    status = 429

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def request_key(task: Task, backend: str, files: dict[str, str], config_json: str) -> str:
    """The content hash that makes results idempotent: task, backend, files and effective config."""
    blob = json.dumps({"v": 1, "task": task.model_dump(mode="json"), "backend": backend, "files": files,
                       "config": json.loads(config_json)}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


class Service:
    """Admission, the durable store and the judge pool (see the module's docstring)."""

    def __init__(self, config: ServeConfig, slots: Slots | None = None) -> None:
        self.config = config
        self.store = Store(config.db)
        self.metrics = Metrics()
        self._tasks = _known_tasks(config.tasks)
        self._sources: OrderedDict[str, Task] = OrderedDict()  # task sources of recent requests, parsed
        if slots is None:
            slots, labels = self._make_slots()
        else:
            labels = []
        self.slots = slots
        self.n_slots = max(1, len(labels) or config.slots)
        self.devices: dict[str, DeviceState] = {label: DeviceState(label=label) for label in labels}
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._lock = threading.Lock()
        self._queued = 0
        self._running = 0
        self._eval_s: deque[float] = deque(maxlen=50)  # recent evaluation times, for the retry hint
        self._latency: deque[tuple[float, float]] = deque(maxlen=2000)  # (finished at, accept-to-verdict s)
        self._listeners: list[Callable[[str], None]] = []
        self._thread: threading.Thread | None = None
        self.started_at = time.time()
        self.recovered: dict[str, int] = {}

    def _make_slots(self) -> tuple[Slots, list[str]]:
        c = self.config
        if c.pool == "ray":
            return RaySlots(c.backend, c.ray_address, num_cpus=None if c.ray_address else c.slots), []
        specs = device_slots(c.backend, c.devices, cpu_slots=c.slots)
        log_dir = c.log_dir or c.db.parent / f"{c.db.stem}-logs"
        return LocalSlots(specs, log_dir), [s.label for s in specs]

    # --- life cycle -------------------------------------------------------------------------
    def start(self) -> None:
        """Recover what the store holds, then start feeding the pool."""
        failed_before = self.store.counts().get("failed", 0)
        pending = self.store.recover()
        self.recovered = {"requeued": len(pending),
                          "interrupted": self.store.counts().get("failed", 0) - failed_before}
        for key, _ in pending:
            self._enqueue(key)
        self._thread = threading.Thread(target=self._dispatch, name="serve-dispatch", daemon=True)
        self._thread.start()

    def close(self, grace_s: float = 30.0) -> None:
        """Stop taking jobs; let running ones finish for `grace_s`, then kill them (their rows stay
        'running' and are failed explicitly on the next start). Queued rows wait for the next start."""
        self._queue.put(None)
        if self._thread is not None:
            self._thread.join(grace_s)
            if self._thread.is_alive():
                self.slots._abort()  # noqa: SLF001 - the scheduler's own stop-now, as on Ctrl-C
                self._thread.join(10)
        self.store.close()

    def on_finish(self, listener: Callable[[str], None]) -> None:
        """Call `listener(id)` (on the pool's thread) whenever an evaluation is done or failed."""
        self._listeners.append(listener)

    # --- admission --------------------------------------------------------------------------
    def submit(self, requests: list[EvalRequest]) -> list[Evaluation]:
        """Admit a batch, all or nothing: bad input raises ServeError, a full queue Busy."""
        prepared = [self._prepare(r) for r in requests]
        with self._lock:
            out: list[Evaluation | None] = []
            new: list[tuple[str, str, dict[str, Any]]] = []
            again: list[str] = []
            seen: set[str] = set()
            for key, task_name, job in prepared:
                existing = self.store.get(key)
                if key in seen or (existing is not None and existing.status != "failed"):
                    out.append(existing.model_copy(update={"cached": True}) if existing else None)
                    seen.add(key)
                    continue
                seen.add(key)
                if existing is not None:  # failed before (e.g. interrupted): submitting again re-runs it
                    again.append(key)
                else:
                    new.append((key, task_name, job))
                out.append(None)
            incoming = len(new) + len(again)
            limit = self.config.max_queue + self.n_slots
            if incoming and self._queued + self._running + incoming > limit:
                self.metrics.rejected.labels("busy").inc()
                raise Busy(f"the queue is full ({self._queued} waiting, {self._running} running, limit {limit}); "
                           "retry later", self._retry_after(incoming))
            if new:
                self.store.add(new)
            for key in again:
                self.store.requeue(key)
            for key in [k for k, _, _ in new] + again:
                self._enqueue(key)
            self.metrics.accepted.inc(incoming)
            self.metrics.cache_hits.inc(len(requests) - incoming)
        return [o if o is not None else self.store.get(k) for o, (k, _, _) in zip(out, prepared)]  # type: ignore[misc]

    def _prepare(self, req: EvalRequest) -> tuple[str, str, dict[str, Any]]:
        c = self.config
        if len(req.files) > c.max_files:
            raise ServeError(f"too many files: {len(req.files)} (limit {c.max_files})", 413)
        for rel, text in req.files.items():
            if len(text.encode()) > c.max_file_bytes:
                raise ServeError(f"file {rel} is {len(text.encode())} bytes, over the limit of {c.max_file_bytes}",
                                 413)
        task = self.resolve_task(req.task.name, req.task.source)
        config = req.options.to_config(c.backend, c.max_timeout_s, c.memory_limit_gb)
        config_json = config.model_dump_json()
        key = request_key(task, c.backend, req.files, config_json)
        return key, task.name, {"task": task.model_dump_json(), "backend": c.backend, "files": req.files,
                                "config": config_json}

    def resolve_task(self, name: str | None, source: str | None) -> Task:
        if name is not None:
            task = self._tasks.get(name) or self._tasks.get(f"examples/{name}")
            if task is None:
                known = sorted(k for k in self._tasks if not k.startswith("examples/"))
                raise ServeError(f"unknown task {name!r}; the server knows: {', '.join(known[:20])}"
                                 f"{' ...' if len(known) > 20 else ''}")
            return task
        assert source is not None
        if len(source.encode()) > self.config.max_file_bytes:
            raise ServeError(f"task source is {len(source.encode())} bytes, over the limit of "
                             f"{self.config.max_file_bytes}", 413)
        digest = hashlib.sha256(source.encode()).hexdigest()
        with _PARSE:  # one parse at a time (see _PARSE); a source seen lately is not parsed again
            task = self._sources.get(digest)
            if task is not None:
                self._sources.move_to_end(digest)
                return task
            try:
                task = Task.from_source(source, name=f"task-{digest[:12]}", origin="request")
            except TaskError as exc:
                raise ServeError(f"task.source: {exc}") from None
            self._sources[digest] = task
            if len(self._sources) > 256:
                self._sources.popitem(last=False)
            return task

    def _enqueue(self, key: str) -> None:
        self._queued += 1
        self.metrics.queue_depth.set(self._queued)
        self._queue.put(key)

    def _retry_after(self, incoming: int) -> int:
        per = sum(self._eval_s) / len(self._eval_s) if self._eval_s else 10.0
        backlog = self._queued + self._running + incoming - self.config.max_queue - self.n_slots
        return max(1, math.ceil(per * max(1, backlog) / self.n_slots))

    # --- the pool ---------------------------------------------------------------------------
    def _jobs(self) -> Iterator[tuple[str, dict[str, Any]]]:
        while (key := self._queue.get()) is not None:
            with self._lock:
                self._queued -= 1
                self.metrics.queue_depth.set(self._queued)
                job = self.store.job(key) if self.store.start(key) else None
                if job is None:
                    continue
                self._running += 1
                self.metrics.running.set(self._running)
            yield key, job

    def _dispatch(self) -> None:
        self.slots.run(self._jobs(), stateless(run_job), self._on_result)

    def _on_result(self, job: tuple[str, dict[str, Any]], outcome: Outcome[str]) -> None:
        key = job[0]
        result = None
        error = outcome.error
        if outcome.value is not None:
            try:
                result = EvalResult.model_validate_json(outcome.value)
            except ValueError as exc:
                error = f"the worker's answer did not parse: {exc}"[:4000]
        self.store.finish(key, result=result, error=error, slot=outcome.slot, extra_runs=outcome.attempts - 1)
        row = self.store.get(key)
        now = time.time()
        with self._lock:
            self._running -= 1
            self.metrics.running.set(self._running)
            dev = self.devices.setdefault(outcome.slot, DeviceState(label=outcome.slot))
            busy = (now - row.started_at) if row and row.started_at else 0.0
            dev.busy_seconds += busy
            dev.last_finished_at = now
            if result is not None:
                dev.completed += 1
                self._eval_s.append(busy)
            else:
                dev.failed += 1
            if row is not None:
                self._latency.append((now, now - row.created_at))
        self.metrics.observe(result, error, busy, (now - row.created_at) if row else None, outcome.slot)
        for listener in list(self._listeners):
            listener(key)

    # --- reads ------------------------------------------------------------------------------
    def get(self, key: str) -> Evaluation | None:
        return self.store.get(key)

    def health(self) -> Health:
        now = time.time()
        with self._lock:
            lat = sorted(s for _, s in self._latency)
            recent = sum(1 for t, _ in self._latency if now - t <= 300)
            window = min(300.0, now - self.started_at)
            queued, running = self._queued, self._running
        return Health(backend=self.config.backend, pool=self.config.pool, slots=self.n_slots, queue_depth=queued,
                      running=running, max_queue=self.config.max_queue, uptime_s=now - self.started_at,
                      counts=self.store.counts(), latency_p50_s=_quantile(lat, 0.5), latency_p99_s=_quantile(lat, 0.99),
                      throughput_per_s=recent / window if window > 0 and recent else None)

    def device_states(self) -> list[DeviceState]:
        up = max(1e-9, time.time() - self.started_at)
        with self._lock:
            out = [d.model_copy(update={"utilisation": min(1.0, d.busy_seconds / up)}) for d in self.devices.values()]
        for d in out:
            self.metrics.utilisation.labels(d.label).set(d.utilisation)
        return out

    def task_names(self) -> list[str]:
        return sorted(k for k in self._tasks if not k.startswith("examples/"))


def _quantile(sorted_values: list[float], q: float) -> float | None:
    if not sorted_values:
        return None
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def _known_tasks(sources: list[str]) -> dict[str, Task]:
    """Bundled examples (by `swish` and `examples/swish`) and every task of the given sources."""
    from ..examples import list_examples

    tasks: dict[str, Task] = {}
    for ex in list_examples():
        tasks[ex.name] = tasks[ex.task.name] = ex.task
    for src in sources:
        for task in load_tasks(src):
            tasks[task.name] = task
    return tasks


__all__ = ["Busy", "ServeConfig", "ServeError", "Service", "request_key"]
