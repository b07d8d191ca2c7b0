"""Parent side of the data worker: a subprocess that runs generated or third-party task code.

Task code is untrusted (an LLM may have written it; an audited data set may come from anywhere),
so it never runs in the caller's process. Each worker is started the way the evaluation
environment starts its own (`evaluation/sandbox.py`): a scrubbed environment and private scratch
directory, its own process group, new network and PID namespaces where the OS allows, a
resident-memory watchdog and a deadline per request; a kill takes the whole group. Replies come
over the evaluation channel (`evaluation/channel.py`): JSON frames on a private pipe, decoded
without executing anything. A worker serves many requests (torch import and device start-up are
paid once) and is replaced after a crash, a timeout or `max_requests`.
"""

from __future__ import annotations

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

from ..evaluation.channel import ChannelError, ChannelTimeout, Reader
from ..evaluation.runner import WorkerDied
from ..evaluation.sandbox import (NAMESPACE_PREFIX, make_scratch, namespaces_available, process_tree,
                                  resident_bytes, scrubbed_environment)

__all__ = ["DataWorker", "WorkerDied", "WorkerError"]

WATCH_INTERVAL_S = 0.5
_SRC_ROOT = str(Path(__file__).resolve().parents[2])


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
        self.stage = stage
        self.message = message


class DataWorker:
    """One data worker process; `request` sends a JSON request and waits for its reply."""

    def __init__(self, backend: str = "cpu", *, isolate: bool = True, memory_limit_gb: float | None = None,
                 threads: int | None = None, max_requests: int = 500, extra_env: dict[str, str] | None = None):
        self.backend = backend
        self.memory_limit = int(memory_limit_gb * 2**30) if memory_limit_gb else _default_memory_limit()
        self.max_requests = max_requests
        self.requests = 0
        self.namespaces = isolate and namespaces_available()
        self.scratch = make_scratch(Path(tempfile.mkdtemp(prefix="cuda-agent-data-")))
        self._log = tempfile.NamedTemporaryFile(prefix="cuda-agent-data-", suffix=".log", delete=False)
        self._killed_for: str | None = None
        self._last_watch = 0.0
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_SRC_ROOT, env.get("PYTHONPATH", "")) if p)
        extra = dict(extra_env or {})
        if threads:
            extra.update({"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)})
        extra["CUDA_AGENT_DATA_ISOLATE"] = "1" if isolate else "0"
        read_fd, write_fd = os.pipe()
        self.proc = subprocess.Popen(
            [*(NAMESPACE_PREFIX if self.namespaces else ()),
             sys.executable, "-m", "cuda_agent.data.worker", str(write_fd), backend],
            stdin=subprocess.PIPE, stdout=self._log, stderr=subprocess.STDOUT, pass_fds=(write_fd,),
            start_new_session=True, text=True, env=scrubbed_environment(env, self.scratch, extra),
        )
        os.close(write_fd)
        self.fd = read_fd
        self.reader = Reader(read_fd, on_wait=self._watch)

    # ---- talking ----------------------------------------------------------------------------
    def send(self, message: dict[str, Any] | str) -> None:
        line = message if isinstance(message, str) else json.dumps(message)
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # the worker is gone; the next receive says why

    def receive(self, timeout_s: float) -> dict[str, Any]:
        """The next reply; WorkerDied on timeout, crash or limit; WorkerError if it reported one."""
        try:
            reply = self.reader.receive(time.monotonic() + timeout_s)
        except ChannelTimeout:
            self.kill()
            raise WorkerDied(self._killed_for or f"timed out after {timeout_s:.0f} s") from None
        except ChannelError as exc:
            raise WorkerDied(self._death_reason(str(exc))) from None
        if reply.get("type") == "error":
            raise WorkerError(str(reply.get("stage", "worker")), str(reply.get("message", "")))
        return reply

    def request(self, message: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        self.requests += 1
        self.send(message)
        return self.receive(timeout_s)

    @property
    def worn_out(self) -> bool:
        return self.requests >= self.max_requests or not self.alive()

    def alive(self) -> bool:
        return self.proc.poll() is None

    # ---- watching ---------------------------------------------------------------------------
    def _watch(self) -> None:
        now = time.monotonic()
        if now - self._last_watch < WATCH_INTERVAL_S:
            return
        self._last_watch = now
        rss = resident_bytes(process_tree(self.proc.pid))
        if rss > self.memory_limit:
            self._killed_for = (f"out of memory: the worker used {rss / 2**30:.1f} GiB, over the "
                                f"{self.memory_limit / 2**30:.1f} GiB limit")
            self.kill()

    def _death_reason(self, problem: str) -> str:
        if self._killed_for:
            return self._killed_for
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
            return f"the worker stopped talking ({problem})"
        if code < 0:
            return f"crashed ({signal.Signals(-code).name})"
        return f"the worker exited with status {code} ({problem}); log: {self.log_tail()[-400:]}"

    def log_tail(self, chars: int = 2000) -> str:
        try:
            return Path(self._log.name).read_bytes()[-chars:].decode(errors="replace")
        except OSError:
            return ""

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def close(self) -> None:
        self.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
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
        shutil.rmtree(self.scratch, ignore_errors=True)

    def __enter__(self) -> "DataWorker":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
