"""The judge's handle on one candidate process: spawn it sandboxed, talk over a private
socket with deadlines, freeze it while the judge works, watch it from /proc, kill it.

The candidate runs in its own session (so one signal reaches everything it started), dies
with the judge (parent-death signal), in a new network namespace where the OS allows, with a scrubbed environment and a scratch dir as its only writable place.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .._procs import die_with_parent
from .runner import death_reason, kill_tree, tree_violation
from .sandbox import CANDIDATE_NAMESPACE_PREFIX, make_scratch, namespaces_available, process_tree, scrubbed_environment

MAX_MESSAGE = 1 << 22
LOG_TAIL_CHARS = 4000


class CandidateDied(Exception):
    """The candidate ended, hung or broke the protocol; `reason` is readable."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def start_detached_child() -> None:
    """preexec: its own session (one signal reaches all it starts), SIGKILLed when its
    starter dies (`_procs.die_with_parent`), even by SIGKILL."""
    os.setsid()
    die_with_parent()


class CandidateLink:
    """One candidate process. It starts torch and the device at once, then waits for its
    request, so a spare started ahead of time hides that from the next evaluation."""

    def __init__(self, backend: str, env: dict[str, str], isolate: bool = True) -> None:
        self.backend = backend
        self.namespaces = isolate and namespaces_available()
        self.scratch = make_scratch(Path(tempfile.mkdtemp(prefix="cuda-agent-scratch-")))
        self._log = tempfile.NamedTemporaryFile(prefix="cuda-agent-candidate-", suffix=".log", delete=False)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = ours
        self.proc = subprocess.Popen(
            [*(CANDIDATE_NAMESPACE_PREFIX if self.namespaces else ()),
             sys.executable, "-m", "cuda_agent.evaluation.candidate", str(theirs.fileno()), backend],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            pass_fds=(theirs.fileno(),), preexec_fn=start_detached_child,
            env=scrubbed_environment(env, self.scratch, {}),
        )
        theirs.close()
        self.memory_limit = 1 << 62
        self._process_baseline: int | None = None
        self._killed_for: str | None = None
        self._frozen = False

    # ---- talking ----------------------------------------------------------------------
    def send(self, msg: dict[str, Any], fds: list[int] | None = None) -> None:
        try:
            socket.send_fds(self.sock, [json.dumps(msg).encode()], fds or [])
        except OSError:
            pass  # the candidate is gone; the next receive says why

    def receive(self, deadline: float, what: str) -> dict[str, Any]:
        """The next message, or CandidateDied when it dies, hangs past `deadline` or sends
        something that is not a JSON object."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise CandidateDied(self._killed_for or what)
            ready, _, _ = select.select([self.sock], [], [], min(left, 0.25))
            if ready:
                break
            self._watch()
            if self._killed_for:
                raise CandidateDied(self._killed_for)
        try:
            data = self.sock.recv(MAX_MESSAGE)
        except OSError as exc:
            raise CandidateDied(self._death_reason(str(exc))) from None
        if not data:
            raise CandidateDied(self._death_reason("it closed its channel"))
        try:
            msg = json.loads(data)
        except ValueError:
            raise CandidateDied("the candidate process sent a malformed message") from None
        if not isinstance(msg, dict):
            raise CandidateDied("the candidate process sent a malformed message")
        return msg

    # ---- control from outside ------------------------------------------------------------
    def pid(self) -> int:
        """The host PID of the Python process (inside the namespaces it is PID 1)."""
        tree = process_tree(self.proc.pid)
        return tree[-1] if self.namespaces and len(tree) > 1 else self.proc.pid

    def freeze(self) -> None:
        """Stop every thread of the candidate while the judge times its own models: nothing
        it left running on the CPU can slow the baselines or work ahead."""
        if not self._frozen:
            self._signal(signal.SIGSTOP)
            self._frozen = True
            self._wait_stopped()

    def _wait_stopped(self, limit_s: float = 0.05) -> None:
        """SIGSTOP lands asynchronously, and /proc's CPU counters of a running thread lag: wait
        until every thread is stopped, so CPU read from now on is CPU used while frozen."""
        end = time.monotonic() + limit_s
        while time.monotonic() < end:
            running = False
            for pid in process_tree(self.proc.pid):
                try:
                    for tid in os.listdir(f"/proc/{pid}/task"):
                        with open(f"/proc/{pid}/task/{tid}/stat") as fh:
                            stat = fh.read()
                        if stat[stat.rindex(")") + 2] not in "TtZX":
                            running = True
                            break
                except (OSError, ValueError):
                    continue
                if running:
                    break
            if not running:
                return
            time.sleep(0.0002)

    def thaw(self) -> None:
        if self._frozen:
            self._signal(signal.SIGCONT)
            self._frozen = False

    def cpu_ns(self) -> int:
        """CPU time of every live thread of the candidate process tree, in ns (/proc)."""
        total = 0
        for pid in process_tree(self.proc.pid):
            try:
                for tid in os.listdir(f"/proc/{pid}/task"):
                    with open(f"/proc/{pid}/task/{tid}/schedstat") as fh:
                        total += int(fh.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue
        return total

    def watch_processes(self) -> None:
        """From now on a new process in the candidate's tree kills the evaluation."""
        self._process_baseline = len(process_tree(self.proc.pid))

    def _watch(self) -> None:
        self._killed_for = tree_violation(self.proc.pid, self.memory_limit, self._process_baseline, "the candidate")
        if self._killed_for:
            self.kill()

    def _signal(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def _death_reason(self, problem: str) -> str:
        return self._killed_for or death_reason(self.proc, self.kill, problem, "the candidate process")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self) -> str:
        try:
            return Path(self._log.name).read_bytes()[-LOG_TAIL_CHARS:].decode(errors="replace")
        except OSError:
            return ""

    def kill(self) -> None:
        kill_tree(self.proc)

    def close(self) -> None:
        self.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        shutil.rmtree(self.scratch, ignore_errors=True)
        for closer in (self.sock.close, self._log.close, lambda: os.unlink(self._log.name)):
            try:
                closer()
            except OSError:
                pass
