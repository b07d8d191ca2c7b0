"""Parent side of the isolated worker: spawn, talk, watch memory and time, kill.

The worker runs in its own session (process group), so a kill takes everything it started.
Its stdout/stderr go to a file the parent reads only as an untrusted log; results come over
a private pipe and are decoded without executing anything (see channel.py).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from .channel import ChannelError, ChannelTimeout
from .sandbox import process_tree, resident_bytes

LOG_TAIL_CHARS = 4000
WATCH_INTERVAL_S = 0.25  # /proc scans cost CPU the timed models share on small machines


class WorkerDied(Exception):
    """The worker ended without saying why: crash, kill, limit. `reason` is readable."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class WorkerProcess:
    """A sandboxed child process talked to over a private pipe (data synthesis's `DataWorker`
    starts it and sets `proc`, `reader`, `scratch`, `_log`, `memory_limit`): receive with a
    deadline, watch its memory and process tree, explain its death, kill everything it started."""

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
        self._killed_for = tree_violation(self.proc.pid, self.memory_limit, self._process_baseline, "the worker")
        if self._killed_for:
            self.kill()

    def _death_reason(self, channel_problem: str) -> str:
        return self._killed_for or death_reason(self.proc, self.kill, channel_problem, "the worker")

    def log_tail(self) -> str:
        try:
            data = Path(self._log.name).read_bytes()[-LOG_TAIL_CHARS:]
        except OSError:
            return ""
        return data.decode(errors="replace")

    def kill(self) -> None:
        kill_tree(self.proc)

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


def tree_violation(root_pid: int, memory_limit: int, process_baseline: int | None, who: str) -> str | None:
    """Why a process tree must be killed now (too much memory, a process started after the
    candidate was loaded), or None."""
    tree = process_tree(root_pid)
    rss = resident_bytes(tree)
    if rss > memory_limit:
        return f"out of memory: {who} used {rss / 2**30:.1f} GiB, over the {memory_limit / 2**30:.1f} GiB limit"
    if process_baseline is not None and len(tree) > process_baseline:
        return ("forbidden: process creation: candidate code started a new process "
                f"({len(tree) - process_baseline} more than before it was loaded)")
    return None


_SIGNAL_HINTS = {"SIGSEGV": "segmentation fault", "SIGBUS": "bus error", "SIGABRT": "aborted",
                 "SIGKILL": "killed (likely out of memory)", "SIGFPE": "arithmetic fault",
                 "SIGILL": "illegal instruction", "SIGSYS": "forbidden system call"}


def death_reason(proc: subprocess.Popen, kill: Any, problem: str, who: str) -> str:
    """Why `proc` stopped talking, for a person: its signal, its exit status, or a hang."""
    try:
        code = proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        kill()
        return f"{who} stopped talking ({problem})"
    if code < 0 or code > 128:  # killed, directly or as the child of `unshare` (128 + signal)
        sig = signal.Signals(-code if code < 0 else code - 128).name
        return f"crashed: {_SIGNAL_HINTS.get(sig, 'killed')} ({sig})"
    return f"{who} exited with status {code} before finishing ({problem})"


def kill_tree(proc: subprocess.Popen) -> None:
    """SIGKILL the process group, and every descendant that left it (setsid daemons)."""
    pids = process_tree(proc.pid) if proc.poll() is None else []
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def deadline_in(seconds: float) -> float:
    return time.monotonic() + seconds
