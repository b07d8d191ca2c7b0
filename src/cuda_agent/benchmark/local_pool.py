"""The local pool: CPU build workers feeding one evaluation slot per device.

As in the paper's design, compilation and evaluation are separate pools: a thread pool runs
the build stage (static checks + build; compilers are subprocesses, so threads suffice), and
each device has one slot process (slot.py) that runs evaluations one at a time, so no two
timings share a GPU. A slot that dies is restarted and its job retried once.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path


from ..backends.devices import SlotSpec, device_slots  # noqa: F401  (device_slots: re-exported with the pool)
from .jobs import build_stage, workspace_dirname
from .records import Job, TaskRecord

OnRecord = Callable[[TaskRecord], None]
_SRC_ROOT = str(Path(__file__).resolve().parents[2])


class _Slot:
    """Driver side of one slot process."""

    def __init__(self, spec: SlotSpec, log_path: Path) -> None:
        self.spec = spec
        self.log_path = log_path
        self.proc: subprocess.Popen[str] | None = None

    def _start(self) -> subprocess.Popen[str]:
        env = dict(os.environ)
        env.update(self.spec.env)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_SRC_ROOT, env.get("PYTHONPATH", "")) if p)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("a")
        try:
            return subprocess.Popen([sys.executable, "-m", "cuda_agent.benchmark.slot", str(os.getpid())],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env,
                                    text=True, start_new_session=True)
        finally:
            log.close()

    def evaluate(self, job: Job, directory: Path) -> TaskRecord:
        """Run the device stage in the slot; restart a dead slot and try once more."""
        import json

        for attempt in (1, 2):
            if self.proc is None or self.proc.poll() is not None:
                self.proc = self._start()
            assert self.proc.stdin is not None and self.proc.stdout is not None
            try:
                self.proc.stdin.write(json.dumps({"job": job.model_dump(mode="json"),
                                                  "directory": str(directory)}) + "\n")
                self.proc.stdin.flush()
                line = self.proc.stdout.readline()
            except (BrokenPipeError, OSError):
                line = ""
            if line:
                record = TaskRecord.model_validate_json(line)
                return record.model_copy(update={"slot": self.spec.label, "attempts": attempt})
            self.close()
        return TaskRecord.for_task(job.task, sample=job.sample, mode=job.mode, status="harness_error",
                                   slot=self.spec.label,
                                   attempts=2, reason=f"evaluation slot {self.spec.label} died twice on this task; "
                                                      f"see {self.log_path}:\n{_tail(self.log_path)}")

    def close(self) -> None:
        if self.proc is None:
            return
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
            self.proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        self.proc = None


class LocalPool:
    """Build workers + one evaluation slot per device, on this machine."""

    def __init__(self, slots: list[SlotSpec], build_workers: int = 2, log_dir: Path | None = None) -> None:
        if not slots:
            raise ValueError("the local pool needs at least one evaluation slot")
        self.slots = slots
        self.build_workers = max(1, build_workers)
        self.log_dir = log_dir

    def run(self, jobs: list[Job], workdir: Path, on_record: OnRecord) -> None:
        log_dir = self.log_dir or workdir / "logs"
        ready: queue.Queue[Job | None] = queue.Queue()
        errors: list[BaseException] = []
        slots = [_Slot(s, log_dir / f"slot-{s.label.replace(':', '')}.log") for s in self.slots]

        def slot_loop(slot: _Slot) -> None:
            try:
                while (job := ready.get()) is not None:
                    on_record(slot.evaluate(job, workdir / workspace_dirname(job.key)))
            except BaseException as exc:  # a store write failed: stop, report at the end
                errors.append(exc)
            finally:
                slot.close()

        threads = [threading.Thread(target=slot_loop, args=(s,), daemon=True, name=f"slot-{s.spec.label}")
                   for s in slots]
        for t in threads:
            t.start()
        try:
            with ThreadPoolExecutor(self.build_workers, thread_name_prefix="build") as builds:
                futures = {}
                for job in jobs:
                    if job.policy:
                        ready.put(job)
                    else:
                        futures[builds.submit(build_stage, job, workdir / workspace_dirname(job.key))] = job
                for fut in as_completed(futures):
                    record = fut.result()
                    if record is None:
                        ready.put(futures[fut])
                    else:
                        on_record(record.model_copy(update={"slot": "build"}))
        finally:
            for _ in threads:
                ready.put(None)
            for t in threads:
                t.join()
        if errors:
            raise errors[0]


def _tail(path: Path, chars: int = 2000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""
