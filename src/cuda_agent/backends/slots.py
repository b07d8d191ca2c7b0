"""One scheduler over device slots, with a local and a Ray implementation.

A caller hands `run` an iterable of jobs (it may block, e.g. on builds), a worker factory and a
callback. The factory is a picklable callable run once per slot process (to load a policy, say);
it returns the function that handles one job. Each slot runs one job at a time; each result
comes back, as it completes, to `on_result(job, Outcome)` on the calling thread, one at a time.

`LocalSlots`: one long-lived process per `SlotSpec` (`python -m cuda_agent.backends.slots`),
started with the slot's environment (so its device is pinned before anything imports CUDA), in
its own session, dying with the driver (PR_SET_PDEATHSIG). Jobs and results cross its stdin and
stdout as pickles; anything it prints goes to its log. A slot that dies is restarted and its job
tried once more; a second death is an `Outcome` with an error, not an exception.
`RaySlots`: the same contract over Ray tasks (one GPU each on a GPU backend); a task that keeps
failing after Ray's retries is an `Outcome` with an error.

Ctrl-C, SIGTERM (`isolation.processes.terminate_on_sigterm`) or an exception in `on_result`
stops every slot at once and is raised.
"""

from __future__ import annotations

import os
import pickle
import queue
import signal
import subprocess
import sys
import threading
import traceback
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Generic, TypeVar

from .devices import SlotSpec

J = TypeVar("J")
R = TypeVar("R")
Factory = Callable[[], Callable[[Any], Any]]
"""Picklable; called once per slot process; returns the function that handles one job."""
_SRC_ROOT = str(Path(__file__).resolve().parents[2])
_END = object()


@dataclass(frozen=True)
class Outcome(Generic[R]):
    """What became of one job: its value, or why there is none (a slot that died twice, a
    failed Ray task, an exception in the work function)."""

    slot: str
    attempts: int = 1
    value: R | None = None
    error: str | None = None


OnResult = Callable[[Any, Outcome[Any]], None]


def stateless(work: Callable[[J], R]) -> Factory:
    """The factory of a work function that needs no per-slot state (`work` must be importable)."""
    return partial(_same, work)


def _same(work: Callable[[J], R]) -> Callable[[J], R]:
    return work


class _Jobs:
    """The job stream, taken from by several threads; stops handing out jobs once stopped."""

    def __init__(self, jobs: Iterable[Any]) -> None:
        self._it: Iterator[Any] = iter(jobs)
        self._lock = threading.Lock()
        self.stopped = threading.Event()

    def take(self) -> Any:
        with self._lock:
            return _END if self.stopped.is_set() else next(self._it, _END)


class Slots(ABC):
    """Run jobs on slots; see the module's docstring for the contract."""

    def run(self, jobs: Iterable[J], factory: Factory, on_result: Callable[[J, Outcome[Any]], None]) -> None:
        stream, done = _Jobs(jobs), queue.Queue()  # type: ignore[var-annotated]
        producers = self._start(stream, factory, done)
        try:
            while producers:
                item = done.get()
                if item is _END:
                    producers -= 1
                elif isinstance(item, BaseException):  # the job stream raised
                    raise item
                else:
                    on_result(*item)
        except BaseException:
            stream.stopped.set()
            self._abort()
            raise
        finally:
            stream.stopped.set()
            self._join()

    @abstractmethod
    def _start(self, stream: _Jobs, factory: Factory, done: queue.Queue[Any]) -> int:
        """Start serving `stream`, putting (job, Outcome) on `done`; return how many producers
        will each put `_END` when they finish (or an exception when the stream raises)."""

    @abstractmethod
    def _abort(self) -> None:
        """Stop all work now."""

    @abstractmethod
    def _join(self) -> None:
        """Wait for the producers to end."""


class _SlotProcess:
    """Driver side of one slot process: started lazily, restarted when it died."""

    def __init__(self, spec: SlotSpec, log_path: Path, factory: bytes) -> None:
        self.spec, self.log_path, self.factory = spec, log_path, factory
        self.proc: subprocess.Popen[bytes] | None = None
        self.stopped = False

    def _start(self) -> subprocess.Popen[bytes]:
        env = {**os.environ, **self.spec.env}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_SRC_ROOT, env.get("PYTHONPATH", "")) if p)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            proc = subprocess.Popen([sys.executable, "-m", __name__, str(os.getpid())], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=log, env=env, start_new_session=True)
        assert proc.stdin is not None
        try:
            proc.stdin.write(self.factory)
        except OSError:
            pass  # it died at once: found out when the job is sent
        return proc

    def run(self, job: Any) -> Outcome[Any]:
        for attempt in (1, 2):
            if self.stopped:
                break
            if self.proc is None or self.proc.poll() is not None:
                self.proc = self._start()
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
            try:
                if pipe:
                    pipe.close()
            except OSError:
                pass
        self.proc = None


class LocalSlots(Slots):
    """One process per slot on this machine, a driver thread for each."""

    def __init__(self, slots: Sequence[SlotSpec], log_dir: str | Path | None = None) -> None:
        if not slots:
            raise ValueError("a scheduler needs at least one slot")
        self.slots = list(slots)
        self.log_dir = Path(log_dir) if log_dir else Path.cwd() / "logs"
        self._procs: list[_SlotProcess] = []
        self._threads: list[threading.Thread] = []

    def _start(self, stream: _Jobs, factory: Factory, done: queue.Queue[Any]) -> int:
        blob = pickle.dumps(factory)
        names = [s.label.replace(":", "") for s in self.slots]
        self._procs = [_SlotProcess(s, self.log_dir / f"slot-{n}{f'-{i}' if names.count(n) > 1 else ''}.log", blob)
                       for i, (s, n) in enumerate(zip(self.slots, names))]

        def serve(slot: _SlotProcess) -> None:  # the process is started from this thread: it dies with it
            try:
                while (job := stream.take()) is not _END:
                    outcome = slot.run(job)
                    if slot.stopped:
                        break
                    done.put((job, outcome))
            except BaseException as exc:  # the job stream raised: the run stops, the caller sees it
                done.put(exc)
            finally:
                slot.close()
                done.put(_END)

        self._threads = [threading.Thread(target=serve, args=(p,), daemon=True, name=f"slot-{p.spec.label}")
                         for p in self._procs]
        for t in self._threads:
            t.start()
        return len(self._threads)

    def _abort(self) -> None:
        for p in self._procs:
            p.stopped = True
            p.kill()

    def _join(self) -> None:
        for t in self._threads:
            t.join()


class RaySlots(Slots):
    """Ray tasks: one GPU each on a GPU backend (Ray then runs one job per GPU), one CPU otherwise.
    Ray retries a task whose worker died (`max_retries`); a slot is labelled `ray:<its GPUs>`."""

    def __init__(self, backend: str, address: str | None = None, num_cpus: int | None = None,
                 max_retries: int = 2, init_kwargs: dict[str, Any] | None = None) -> None:
        self.backend, self.address, self.num_cpus = backend, address, num_cpus
        self.max_retries = max_retries
        self.init_kwargs = init_kwargs or {}
        self._refs: list[Any] = []
        self._feeder: threading.Thread | None = None

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
        """Ray resources of one slot task."""
        gpus = {"num_gpus": 1} if _uses_gpus(self.backend) else {}
        return {"num_cpus": 1, "max_retries": self.max_retries, **gpus}

    def on_cpu(self, fn: Callable[..., R], *args: Any) -> Future[R]:
        """Run `fn(*args)` as a one-CPU Ray task (e.g. a build feeding the slots)."""
        ray = self.ray()
        return ray.remote(num_cpus=1, max_retries=self.max_retries)(fn).remote(*args).future()

    def _start(self, stream: _Jobs, factory: Factory, done: queue.Queue[Any]) -> int:
        task = self.ray().remote(**self.slot_options())(_ray_slot)
        self._refs = []

        def report(job: Any, fut: Future[Any]) -> None:
            try:
                label, ok, payload = fut.result()
                done.put((job, Outcome(label, 1, payload if ok else None, None if ok else payload)))
            except BaseException as exc:  # the task raised, or its worker kept dying
                done.put((job, Outcome("ray", 1 + self.max_retries, error=f"ray task failed: {exc}"[:4000])))

        def feed() -> None:
            futures = []
            try:
                while (job := stream.take()) is not _END:
                    ref = task.remote(factory, job)
                    self._refs.append(ref)
                    fut = ref.future()
                    fut.add_done_callback(partial(report, job))
                    futures.append(fut)
                wait_futures(futures)
            except BaseException as exc:
                done.put(exc)
            finally:
                done.put(_END)

        self._feeder = threading.Thread(target=feed, daemon=True, name="ray-slots")
        self._feeder.start()
        return 1

    def _abort(self) -> None:
        import ray

        for ref in self._refs:
            try:
                ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 - finished already, or the cluster went away
                pass

    def _join(self) -> None:
        if self._feeder is not None:
            self._feeder.join()


def _uses_gpus(backend: str) -> bool:
    """Whether a slot of this backend holds a GPU (TODO: a Backend property, once it exists)."""
    return backend == "cuda"


def _ray_slot(factory: Factory, job: Any) -> tuple[str, bool, Any]:
    ok, payload = _call(factory(), job)
    return f"ray:{os.environ.get('CUDA_VISIBLE_DEVICES', '') or 'cpu'}", ok, payload


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
    factory = pickle.load(requests)
    try:
        work: Callable[[Any], Any] | None = factory()
        setup_error = ""
    except Exception:  # noqa: BLE001 - every job hears why
        work, setup_error = None, f"the slot could not be set up:\n{traceback.format_exc()[-4000:]}"
    while True:
        try:
            job = pickle.load(requests)
        except EOFError:
            return
        reply = _call(work, job) if work is not None else (False, setup_error)
        try:
            data = pickle.dumps(reply)
        except Exception as exc:  # noqa: BLE001
            data = pickle.dumps((False, f"the result could not be sent back: {type(exc).__name__}: {exc}"))
        replies.write(data)
        replies.flush()


if __name__ == "__main__":
    main()

__all__ = ["Factory", "LocalSlots", "Outcome", "RaySlots", "SlotSpec", "Slots", "stateless"]
