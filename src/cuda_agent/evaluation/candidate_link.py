"""The judge's handle on one candidate process: spawn it sandboxed, talk over a private
socket with deadlines, freeze it while the judge works, watch it from /proc, kill it.

The candidate runs in its own session (so one signal reaches everything it started), dies
with the judge (parent-death signal), in a new network namespace where the OS allows, with a
scrubbed environment and a scratch dir as its only writable place (`isolation.worker`).
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ..isolation.worker import WatchedProcess
from ..isolation.sandbox import CANDIDATE_NAMESPACE_PREFIX, make_scratch, namespaces_available, process_tree, scrubbed_environment

MAX_MESSAGE = 1 << 22


class CandidateDied(Exception):
    """The candidate ended, hung or broke the protocol; `reason` is readable."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class CandidateLink(WatchedProcess):
    """One candidate process. It starts torch and the device at once, then waits for its
    request, so a spare started ahead of time hides that from the next evaluation."""

    def __init__(self, backend: str, env: dict[str, str], isolate: bool = True) -> None:
        self.backend = backend
        self.isolate = isolate  # what was asked for; `namespaces` is what the host could give
        self.namespaces = isolate and namespaces_available()
        scratch = make_scratch(Path(tempfile.mkdtemp(prefix="cuda-agent-scratch-")))
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = ours
        super().__init__(
            [*(CANDIDATE_NAMESPACE_PREFIX if self.namespaces else ()),
             sys.executable, "-m", "cuda_agent.evaluation.candidate", str(theirs.fileno()), backend],
            env=scrubbed_environment(env, scratch, {}), scratch=scratch, log_prefix="cuda-agent-candidate-",
            pass_fds=(theirs.fileno(),), who="the candidate process")
        theirs.close()
        self._closers = [self.sock.close]
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

    def syscall_filters(self) -> list[tuple[str, int, int | None]]:
        """(thread id, seccomp mode, filter count) of every thread of the candidate's Python
        process, read from /proc: what is enforced, not what the process says it did."""
        pid = self.pid()
        out = []
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return out
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/status") as fh:
                    fields = dict(line.split(":", 1) for line in fh if ":" in line)
            except OSError:
                continue  # a thread that just ended
            if "Seccomp" in fields:
                count = fields.get("Seccomp_filters")
                out.append((tid, int(fields["Seccomp"]), int(count) if count is not None else None))
        return out

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

    def _signal(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
