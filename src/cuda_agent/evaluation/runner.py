"""Parent side of the isolated worker: spawn, talk, watch memory and time, kill.

The worker runs in its own session (process group), so a kill takes everything it started.
Its stdout/stderr go to a file the parent reads only as an untrusted log; results come over
a private pipe and are decoded without executing anything (see channel.py).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .channel import ChannelError, ChannelTimeout, Reader
from .sandbox import NAMESPACE_PREFIX, make_scratch, namespaces_available, process_tree, resident_bytes, scrubbed_environment

LOG_TAIL_CHARS = 4000
WATCH_INTERVAL_S = 0.25  # /proc scans cost CPU the timed models share on small machines


class WorkerDied(Exception):
    """The worker ended without saying why: crash, kill, limit. `reason` is readable."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class WorkerProcess:
    """One worker process. It imports torch as soon as it starts, then waits for its request,
    so a spare started ahead of time hides the import from the next evaluation."""

    def __init__(self, env: dict[str, str], backend: str, isolate_network: bool = False):
        self.env_key = _key(env, backend, isolate_network)
        self.memory_limit = 1 << 62
        self.namespaces = isolate_network and namespaces_available()
        self.scratch = make_scratch(Path(tempfile.mkdtemp(prefix="cuda-agent-scratch-")))
        self._log = tempfile.NamedTemporaryFile(prefix="cuda-agent-worker-", suffix=".log", delete=False)
        self._process_baseline: int | None = None
        self._last_watch = 0.0
        read_fd, write_fd = os.pipe()
        self.proc = subprocess.Popen(
            [*(NAMESPACE_PREFIX if self.namespaces else ()),
             sys.executable, "-m", "cuda_agent.evaluation.worker", str(write_fd), backend],
            stdin=subprocess.PIPE, stdout=self._log, stderr=subprocess.STDOUT,
            pass_fds=(write_fd,), start_new_session=True, text=True,
            env=scrubbed_environment(env, self.scratch, {}),
        )
        os.close(write_fd)
        self.fd = read_fd
        self.reader = Reader(read_fd, on_wait=self._watch)
        self._killed_for: str | None = None

    def start(self, request: dict[str, Any], memory_limit_bytes: int) -> None:
        self.memory_limit = memory_limit_bytes
        self.command(json.dumps(request))

    def alive(self) -> bool:
        return self.proc.poll() is None

    # ---- talking ----------------------------------------------------------------------
    def command(self, line: str) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # the worker is gone; the next receive reports why

    def receive(self, deadline: float) -> dict[str, Any]:
        try:
            return self.reader.receive(deadline)
        except ChannelTimeout:
            self.kill()
            raise WorkerDied(self._killed_for or "timed out (the worker hung or ran too long)") from None
        except ChannelError as exc:
            raise WorkerDied(self._death_reason(str(exc))) from None

    # ---- watching ---------------------------------------------------------------------
    def watch_processes(self) -> None:
        """From now on (candidate code is about to run) any new process in the worker's tree
        kills the evaluation: kernels have no business starting programs."""
        self._process_baseline = len(process_tree(self.proc.pid))

    def _watch(self) -> None:
        now = time.monotonic()
        if now - self._last_watch < WATCH_INTERVAL_S:
            return
        self._last_watch = now
        tree = process_tree(self.proc.pid)
        rss = resident_bytes(tree)
        if rss > self.memory_limit:
            self._killed_for = (f"out of memory: the worker used {rss / 2**30:.1f} GiB, over the "
                                f"{self.memory_limit / 2**30:.1f} GiB limit")
            self.kill()
        elif self._process_baseline is not None and len(tree) > self._process_baseline:
            self._killed_for = ("forbidden: process creation: candidate code started a new process "
                                f"({len(tree) - self._process_baseline} more than before it was loaded)")
            self.kill()

    def _death_reason(self, channel_problem: str) -> str:
        if self._killed_for:
            return self._killed_for
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
            return f"the worker stopped talking ({channel_problem})"
        if code < 0:
            sig = signal.Signals(-code).name
            hint = {"SIGSEGV": "segmentation fault", "SIGBUS": "bus error", "SIGABRT": "aborted",
                    "SIGKILL": "killed (likely out of memory)", "SIGFPE": "arithmetic fault",
                    "SIGILL": "illegal instruction"}.get(sig, "killed")
            return f"crashed: {hint} ({sig})"
        return f"the worker exited with status {code} before finishing ({channel_problem})"

    def log_tail(self) -> str:
        try:
            data = Path(self._log.name).read_bytes()[-LOG_TAIL_CHARS:]
        except OSError:
            return ""
        return data.decode(errors="replace")

    def kill(self) -> None:
        """The process group, and every descendant that left it (setsid daemons)."""
        pids = process_tree(self.proc.pid) if self.proc.poll() is None else []
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def close(self) -> None:
        self.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        shutil.rmtree(self.scratch, ignore_errors=True)
        for closer in (lambda: os.close(self.fd), self._log.close, lambda: os.unlink(self._log.name)):
            try:
                closer()
            except OSError:
                pass
        if self.proc.stdin:
            try:
                self.proc.stdin.close()
            except OSError:
                pass


_spare: WorkerProcess | None = None


def _key(env: dict[str, str], backend: str, isolate_network: bool) -> str:
    return json.dumps([backend, isolate_network, env], sort_keys=True)


def acquire_worker(env: dict[str, str], backend: str, isolate_network: bool = False) -> WorkerProcess:
    """The spare worker if one with this environment is waiting, else a new one."""
    global _spare
    spare, _spare = _spare, None
    if spare is not None and spare.alive() and spare.env_key == _key(env, backend, isolate_network):
        return spare
    if spare is not None:
        spare.close()
    return WorkerProcess(env, backend, isolate_network)


def prespawn_worker(env: dict[str, str], backend: str, isolate_network: bool = False) -> None:
    """Start the next evaluation's worker now (after timing is over, so it disturbs nothing)."""
    global _spare
    if _spare is None or not _spare.alive():
        _spare = WorkerProcess(env, backend, isolate_network)


@atexit.register
def _close_spare() -> None:
    if _spare is not None:
        _spare.close()


def deadline_in(seconds: float) -> float:
    return time.monotonic() + seconds
