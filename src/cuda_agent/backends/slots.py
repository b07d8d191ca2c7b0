"""One scheduler over device slots: `run(jobs, factory, on_result)`, local or on Ray.

The jobs may come from a blocking iterable (e.g. as builds finish). The factory (picklable) runs
once per slot process and returns the function that handles one job; a slot runs one job at a
time, and each result comes back as it completes to `on_result(job, Outcome)` on the caller's
thread. A failure is an `Outcome` with an error, never an exception; Ctrl-C, SIGTERM
(`isolation.processes.terminate_on_sigterm`) or an exception in `on_result` stops every slot.

`LocalSlots`: one process per `SlotSpec`, started in the slot's environment (its device pinned
before anything imports CUDA) and its own session, dying with the driver (PR_SET_PDEATHSIG);
pickles cross its stdin/stdout, its prints go to its log. A slot that dies is restarted and
its job tried once more. `RaySlots`: Ray tasks (one GPU each on a GPU backend), Ray's retries.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
import pickle
import queue
import signal
import subprocess
import sys
import threading
import traceback
from contextlib import suppress
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Generic, TypeVar

from ..isolation.processes import child_environment
from .devices import SlotSpec

J = TypeVar("J")
R = TypeVar("R")
Factory = Callable[[], Callable[[Any], Any]]
"""Picklable; called once per slot process; returns the function that handles one job."""
Server = Callable[[Callable[[], Any], Callable[[Any], None]], None]
"""A serving thread's body: takes jobs until `_END`, puts (job, Outcome)."""
_END = object()


@dataclass(frozen=True)
class Outcome(Generic[R]):
    """What became of one job: its value, or why there is none (a slot that died twice, a failed
    Ray task, the work function's traceback)."""

    slot: str
    attempts: int = 1
    value: R | None = None
    error: str | None = None


def stateless(work: Callable[[J], R]) -> Factory:
    """The factory of a work function that needs no per-slot state (`work` must be importable)."""
    return partial(_same, work)


def _same(work: Callable[[J], R]) -> Callable[[J], R]:
    return work


class Slots(ABC):
    """Run jobs on slots (see the module's docstring); an implementation says how to serve them."""

    def run(self, jobs: Iterable[J], factory: Factory, on_result: Callable[[J, Outcome[Any]], None]) -> None:
        it, lock, stop, done = iter(jobs), threading.Lock(), threading.Event(), queue.Queue()  # type: ignore[var-annotated]

        def take() -> Any:  # the job stream is shared by the serving threads (and may block, e.g. on builds)
            with lock:
                if stop.is_set():
                    return _END
                job = next(it, _END)  # may block; the run may have been stopped meanwhile
                return _END if stop.is_set() else job

        def produce(serve: Server) -> None:
            try:
                serve(take, done.put)
            except BaseException as exc:  # the job stream raised: the run stops and the caller sees it
                done.put(exc)
            finally:
                done.put(_END)

        threads = [threading.Thread(target=produce, args=(s,), daemon=True) for s in self._servers(factory)]
        for t in threads:
            t.start()
        try:
            live = len(threads)
            while live:
                item = done.get()
                if item is _END:
                    live -= 1
                elif isinstance(item, BaseException):
                    raise item
                else:
                    on_result(*item)
        except BaseException:
            stop.set()
            self._abort()
            raise
        finally:
            stop.set()
            for t in threads:
                t.join()

    @abstractmethod
    def _servers(self, factory: Factory) -> list[Server]:
        """One serving thread's body per slot."""

    def _abort(self) -> None:
        """Stop all work now."""


class _SlotProcess:
    """Driver side of one slot process: started lazily, restarted when it died."""

    def __init__(self, spec: SlotSpec, log_path: Path, factory: bytes) -> None:
        self.spec, self.log_path, self.factory = spec, log_path, factory
        self.proc: subprocess.Popen[bytes] | None = None
        self.stopped = False
        self.broken: str | None = None  # its factory failed: every job of it fails at once

    def _start(self) -> subprocess.Popen[bytes]:
        env = child_environment({**os.environ, **self.spec.env})
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            proc = subprocess.Popen([sys.executable, "-m", __name__, str(os.getpid())], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=log, env=env, start_new_session=True)
        with suppress(OSError):  # if it died at once, sending the job finds out
            proc.stdin.write(self.factory)  # type: ignore[union-attr]
            proc.stdin.flush()  # type: ignore[union-attr]
        return proc

    def run(self, job: Any) -> Outcome[Any]:
        for attempt in (1, 2):
            if self.stopped:
                break
            if self.broken:
                return Outcome(self.spec.label, 0, error=self.broken)
            if self.proc is None or self.proc.poll() is not None:
                self.proc = self._start()
                if self.stopped:  # aborted while it started: `kill` found nothing to kill
                    self.kill()
                    break
                try:  # the factory says it is ready: one that fails is not restarted for every job
                    pickle.load(self.proc.stdout)  # type: ignore[arg-type]
                except (OSError, EOFError, pickle.UnpicklingError, ValueError):
                    self.kill()
                    self.broken = f"slot {self.spec.label} could not start its work; see {self.log_path}:\n" \
                                  f"{_tail(self.log_path)}"
                    continue
            proc = self.proc
            assert proc.stdin is not None and proc.stdout is not None
            try:
                pickle.dump(job, proc.stdin)
                proc.stdin.flush()
                ok, payload = pickle.load(proc.stdout)
            except (OSError, EOFError, pickle.UnpicklingError, ValueError):
                self.kill()
                continue
            return Outcome(self.spec.label, attempt, payload if ok else None, None if ok else payload)
        return Outcome(self.spec.label, 2, error=f"slot {self.spec.label} died twice on this job; see "
                                                 f"{self.log_path}:\n{_tail(self.log_path)}")

    def close(self) -> None:
        """Let it finish (end of input), or kill it after 30 s."""
        if self.proc is None:
            return
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
            self.proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.kill()
        self.proc = None

    def kill(self) -> None:
        """Kill it and everything in its session now."""
        proc = self.proc
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            proc.kill()
        proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            with suppress(OSError):
                pipe.close()  # type: ignore[union-attr]
        self.proc = None


class LocalSlots(Slots):
    """One process per slot on this machine, a driver thread for each."""

    def __init__(self, slots: Sequence[SlotSpec], log_dir: str | Path | None = None) -> None:
        if not slots:
            raise ValueError("a scheduler needs at least one slot")
        self.slots = list(slots)
        self.log_dir = Path(log_dir) if log_dir else Path.cwd() / "logs"
        self._procs: list[_SlotProcess] = []

    def _servers(self, factory: Factory) -> list[Server]:
        blob = pickle.dumps(factory)
        names = [s.label.replace(":", "") for s in self.slots]
        self._procs = [_SlotProcess(s, self.log_dir / f"slot-{n}{f'-{i}' if names.count(n) > 1 else ''}.log", blob)
                       for i, (s, n) in enumerate(zip(self.slots, names))]
        return [partial(_serve, p) for p in self._procs]

    def _abort(self) -> None:
        for p in self._procs:
            p.stopped = True
            p.kill()


def _serve(slot: _SlotProcess, take: Callable[[], Any], put: Callable[[Any], None]) -> None:
    """A slot's thread (its process is started from here, so it dies with this thread too)."""
    try:
        while (job := take()) is not _END:
            outcome = slot.run(job)
            if slot.stopped:
                return
            put((job, outcome))
    finally:
        slot.close()


class RaySlots(Slots):
    """Ray tasks: one GPU each on a GPU backend (Ray then runs one job per GPU), one CPU otherwise.
    Ray retries a task whose worker died (`max_retries`); a slot is labelled `ray:<node>:<its GPUs>`."""

    def __init__(self, backend: str, address: str | None = None, num_cpus: int | None = None,
                 max_retries: int = 2, init_kwargs: dict[str, Any] | None = None) -> None:
        self.backend, self.address, self.num_cpus = backend, address, num_cpus
        self.max_retries = max_retries
        self.init_kwargs = init_kwargs or {}
        self._refs: set[Any] = set()  # the tasks not yet reported, for an abort

    def ray(self) -> Any:
        """The `ray` module, connected (to `address`, or to a local cluster it starts)."""
        try:
            import ray
        except ImportError:
            raise RuntimeError("Ray slots need the `ray` extra: pip install 'cuda-agent[ray]'") from None
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, **self.init_kwargs}
            if self.address:
                kwargs["address"] = self.address
            elif self.num_cpus:
                kwargs["num_cpus"] = self.num_cpus
            ray.init(**kwargs)
        return ray

    def slot_options(self) -> dict[str, Any]:
        """Ray resources of one slot task: one GPU each where the backend's device is a GPU."""
        from . import backend_class

        gpu = {"num_gpus": 1} if backend_class(self.backend).gpu else {}
        return {"num_cpus": 1, "max_retries": self.max_retries, **gpu}

    def on_cpu(self, fn: Callable[..., R], *args: Any) -> Future[R]:
        """Run `fn(*args)` as a one-CPU Ray task (e.g. a build feeding the slots)."""
        ray = self.ray()
        return ray.remote(num_cpus=1, max_retries=self.max_retries)(fn).remote(*args).future()

    def _servers(self, factory: Factory) -> list[Server]:
        return [partial(self._feed, self.ray().remote(**self.slot_options())(_ray_slot), factory)]

    def _feed(self, task: Any, factory: Factory, take: Callable[[], Any], put: Callable[[Any], None]) -> None:
        reported = threading.Semaphore(0)

        def report(job: Any, ref: Any, fut: Future[Any]) -> None:
            try:
                label, ok, payload = fut.result()
                put((job, Outcome(label, 1, payload if ok else None, None if ok else payload)))
            except BaseException as exc:  # the task raised, or its worker kept dying
                put((job, Outcome("ray", 1 + self.max_retries, error=f"ray task failed: {exc}"[:4000])))
            finally:
                self._refs.discard(ref)
                reported.release()

        from . import backend_class

        devices_env = backend_class(self.backend).visible_devices_env
        submitted = 0
        while (job := take()) is not _END:
            self._refs.add(ref := task.remote(factory, job, devices_env))
            ref.future().add_done_callback(partial(report, job, ref))
            submitted += 1
        for _ in range(submitted):  # wait for the reports, not the futures: a future's waiters
            reported.acquire()      # wake before its callbacks run, and the last result would be lost

    def _abort(self) -> None:
        import ray

        for ref in list(self._refs):  # reports discard theirs meanwhile
            with suppress(Exception):  # finished already, or the cluster went away
                ray.cancel(ref, force=True)


def _ray_slot(factory: Factory, job: Any, devices_env: str | None) -> tuple[str, bool, Any]:
    ok, payload = _call(factory(), job)
    return _ray_label(devices_env), ok, payload


def _ray_label(devices_env: str | None) -> str:
    """`ray:<node>:<its GPUs>` (or `:cpu`), the node by the first 8 hex digits of its Ray id: GPU 0
    of two nodes is two devices, and per-device state must not add them up."""
    import ray

    gpus = (os.environ.get(devices_env, "") if devices_env else "") or "cpu"
    return f"ray:{ray.get_runtime_context().get_node_id()[:8]}:{gpus}"


def _call(work: Callable[[Any], Any], job: Any) -> tuple[bool, Any]:
    try:
        return True, work(job)
    except Exception:  # noqa: BLE001 - the job's failure, reported as data
        return False, traceback.format_exc()[-4000:]


def _tail(path: Path, chars: int = 2000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def main() -> None:
    """A slot process: the factory, then one job per pickle on stdin, one (ok, value) per pickle on
    the original stdout; anything printed goes to stderr (the slot's log)."""
    from ..isolation.processes import die_with_parent

    die_with_parent(int(sys.argv[1]) if len(sys.argv) > 1 else os.getppid())
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # stray prints (libraries, compilers) must not corrupt the reply stream
    sys.stdout = sys.stderr
    requests = sys.stdin.buffer
    work = pickle.load(requests)()  # if this raises, the slot dies before "ready" and its log says why
    replies.write(pickle.dumps(True))
    replies.flush()
    while True:
        try:
            job = pickle.load(requests)
        except EOFError:
            return
        ok, value = _call(work, job)
        try:
            reply = pickle.dumps((ok, value))
        except Exception:  # noqa: BLE001 - an unpicklable result is the job's failure, not the slot's
            reply = pickle.dumps((False, traceback.format_exc()[-4000:]))
        replies.write(reply)
        replies.flush()

if __name__ == "__main__":
    main()

__all__ = ["Factory", "LocalSlots", "Outcome", "RaySlots", "SlotSpec", "Slots", "stateless"]
