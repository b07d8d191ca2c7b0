"""Client processes forked from one warm process instead of started from nothing.

A client process (candidate.py) spends seconds importing torch and the harness before it can
start the device: on an H100 host ~10 s, which a KernelBench run paid whenever tasks came
faster than spares could start. The fork server (`python -m cuda_agent.evaluation.forkserver`)
is a trusted process that imports all of that once and never starts the device, loads a
workspace or runs candidate code; each client is a fork of it that enters its own session, dies
with it, gets its own network namespace, scratch dir, environment and log, confines its writes
and only then starts the device (`candidate.serve`). A fork costs tens of milliseconds.

It forks only while it has a single thread (a fork copies one thread, and locks another held
would stay locked in the child); when it can't, or is gone, the judge starts clients the old
way (`CandidateLink` falls back to a fresh interpreter). It reports each child's exit status
to the judge, which is not the child's parent.
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

MAX_MESSAGE = 1 << 20
READY_TIMEOUT_S = 180.0  # torch's import on a loaded host
FORK_TIMEOUT_S = 10.0
EXIT_STATUS_WAIT_S = 2.0  # the server reaps a child when it is told (SIGCHLD): moments after it ended
_CLONE_NEWNET = 0x40000000


# ---- the judge's side ---------------------------------------------------------------------
class ForkServer:
    """The judge's handle on its fork server; `fork` gives a Popen-like `ForkedProcess`, or None
    when this server can't fork (not started, dead, or refusing): then start the client anew."""

    def __init__(self, backend: str, env: dict[str, str]) -> None:
        from ..isolation.processes import start_detached_child
        from ..isolation.sandbox import make_scratch, scrubbed_environment

        self.scratch = make_scratch(Path(tempfile.mkdtemp(prefix="cuda-agent-forkserver-")))
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = ours
        self._log = tempfile.NamedTemporaryFile(prefix="cuda-agent-forkserver-", suffix=".log", delete=False)
        # the clients' own variables, so what torch, OpenMP and glibc's malloc read once at start
        # agree; numpy's OpenBLAS would start its thread pool at import (a thread: no fork)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cuda_agent.evaluation.forkserver", str(theirs.fileno()), backend],
            env=scrubbed_environment(env, self.scratch, {"OPENBLAS_NUM_THREADS": "1"}), pass_fds=(theirs.fileno(),), cwd=str(self.scratch),
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT, preexec_fn=start_detached_child)
        theirs.close()
        self.born = time.monotonic()
        self._ready = False
        self._broken = False
        self._exits: dict[int, int] = {}

    def alive(self) -> bool:
        return not self._broken and self.proc.poll() is None

    def ready(self, wait_s: float = 0.0) -> bool:
        """Whether it has said it is ready (waits up to `wait_s` for that)."""
        deadline = time.monotonic() + wait_s
        while not self._ready and self.alive():
            msg = self._next(deadline)
            if msg is None:
                break
        return self._ready and self.alive()

    def fork(self, sock_fd: int, log_fd: int, scratch: Path, env: dict[str, str], net_namespace: bool) -> "ForkedProcess | None":
        """A new client process serving `sock_fd`, or None (the caller starts one the old way)."""
        if not self.ready(READY_TIMEOUT_S - (time.monotonic() - self.born)):
            return None
        request = {"type": "fork", "scratch": str(scratch), "env": env, "net_namespace": net_namespace}
        try:
            socket.send_fds(self.sock, [json.dumps(request).encode()], [sock_fd, log_fd])
        except OSError:
            self._broken = True
            return None
        deadline = time.monotonic() + FORK_TIMEOUT_S
        while True:
            msg = self._next(deadline, want_fds=True)
            if msg is None:
                self._broken = True  # an answer that never came: don't ask this server again
                return None
            if msg.get("type") == "forked" and msg.get("fds"):
                return ForkedProcess(self, int(msg["pid"]), msg["fds"][0])
            if msg.get("type") == "refused":
                for fd in msg.get("fds", []):
                    os.close(fd)
                return None

    def exit_status(self, pid: int, wait_s: float) -> int:
        """A forked child's exit code (Popen's convention: -N for signal N)."""
        deadline = time.monotonic() + wait_s
        while pid not in self._exits and self._next(deadline) is not None:
            pass
        return self._exits.pop(pid, -signal.SIGKILL)  # its server died, and took it along (PDEATHSIG)

    def _next(self, deadline: float, want_fds: bool = False) -> dict[str, Any] | None:
        """The next message (exit reports are filed on the way), or None at the deadline or
        when the server is gone."""
        while True:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.sock], [], [], max(0.0, left))
            if not ready:
                return None
            try:
                data, fds, _, _ = socket.recv_fds(self.sock, MAX_MESSAGE, 2)
            except OSError:
                data, fds = b"", []
            if not data:
                self._broken = True
                return None
            msg = json.loads(data)
            if msg.get("type") == "exit":
                self._exits[int(msg["pid"])] = int(msg["code"])
                continue
            if msg.get("type") == "ready":
                self._ready = True
            msg["fds"] = list(fds)
            if not want_fds:
                for fd in fds:
                    os.close(fd)
            return msg

    def close(self) -> None:
        from ..isolation.worker import kill_tree

        kill_tree(self.proc)  # its children die with it (PDEATHSIG)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self.sock.close()
        self._log.close()
        Path(self._log.name).unlink(missing_ok=True)
        shutil.rmtree(self.scratch, ignore_errors=True)

    def log_tail(self) -> str:
        try:
            return Path(self._log.name).read_bytes()[-4000:].decode(errors="replace")
        except OSError:
            return ""


class ForkedProcess:
    """What `WatchedProcess` needs of a `subprocess.Popen`, for a child of the fork server:
    its end seen through a pidfd, its exit code from the server that reaped it."""

    def __init__(self, server: ForkServer, pid: int, pidfd: int) -> None:
        self.server, self.pid, self.pidfd = server, pid, pidfd
        self.returncode: int | None = None

    def poll(self) -> int | None:
        return self.returncode if self.returncode is not None else self._ended(0.0)

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None and self._ended(timeout) is None:
            raise subprocess.TimeoutExpired(f"client process {self.pid}", timeout or 0.0)
        return self.returncode  # type: ignore[return-value]

    def _ended(self, timeout: float | None) -> int | None:
        ready, _, _ = select.select([self.pidfd], [], [], timeout)
        if not ready:
            return None
        self.returncode = self.server.exit_status(self.pid, EXIT_STATUS_WAIT_S)
        os.close(self.pidfd)
        self.pidfd = -1
        return self.returncode

    def __del__(self) -> None:
        if getattr(self, "pidfd", -1) >= 0:
            try:
                os.close(self.pidfd)
            except OSError:
                pass


# ---- the server ---------------------------------------------------------------------------
def main() -> None:
    ctrl_fd, backend_name = int(sys.argv[1]), sys.argv[2]
    from .candidate import trusted_sys_path, warm_up_imports

    trusted_sys_path()
    import torch

    from ..backends import get_backend

    get_backend(backend_name)  # imported, never started: a started device can't be forked
    warm_up_imports(torch)
    ctrl = socket.socket(fileno=ctrl_fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so SIGCHLD reaches the wakeup pipe
    sys.stdout.flush()
    ctrl.send(json.dumps({"type": "ready"}).encode())
    while True:
        ready, _, _ = select.select([ctrl, wake_r], [], [])
        if wake_r in ready:
            while True:
                try:
                    if not os.read(wake_r, 512):
                        break
                except BlockingIOError:
                    break
            _report_exits(ctrl)
        if ctrl in ready:
            try:
                data, fds, _, _ = socket.recv_fds(ctrl, MAX_MESSAGE, 2)
            except OSError:
                data, fds = b"", []
            if not data:
                os._exit(0)  # the judge is gone (and its children with this process)
            _fork(ctrl, json.loads(data), fds, backend_name, (wake_r, wake_w))


def _report_exits(ctrl: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        try:
            ctrl.send(json.dumps({"type": "exit", "pid": pid, "code": os.waitstatus_to_exitcode(status)}).encode())
        except OSError:
            os._exit(0)


def _fork(ctrl: socket.socket, request: dict[str, Any], fds: list[int], backend_name: str, wake: tuple[int, int]) -> None:
    threads = _thread_count()
    if request.get("type") != "fork" or len(fds) != 2 or threads != 1:
        why = f"{threads} threads" if threads != 1 else "malformed request"
        ctrl.send(json.dumps({"type": "refused", "why": why}).encode())
        for fd in fds:
            os.close(fd)
        return
    sock_fd, log_fd = fds
    sys.stdout.flush()
    sys.stderr.flush()
    server = os.getpid()
    pid = os.fork()
    if pid == 0:
        try:
            _become_client(ctrl, request, sock_fd, log_fd, backend_name, wake, server)
        finally:
            os._exit(70)
    pidfd = os.pidfd_open(pid)  # before the child can be reaped: the judge's handle names this child only
    try:
        socket.send_fds(ctrl, [json.dumps({"type": "forked", "pid": pid}).encode()], [pidfd])
    except OSError:
        os._exit(0)
    finally:
        for fd in (pidfd, sock_fd, log_fd):
            os.close(fd)


def _become_client(ctrl: socket.socket, request: dict[str, Any], sock_fd: int, log_fd: int, backend_name: str,
                   wake: tuple[int, int], server: int) -> None:
    """In the child: drop everything of the server's, take the client's own session, namespace,
    directory, environment and log, then serve as a client process."""
    from ..isolation.processes import die_with_parent

    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    ctrl.close()
    for fd in wake:
        os.close(fd)
    os.setsid()
    die_with_parent(server)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    if request.get("net_namespace"):
        _unshare_network()
    os.chdir(request["scratch"])
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile.tempdir = None  # read again from the client's TMPDIR
    from .candidate import serve

    serve(sock_fd, backend_name)


def _unshare_network() -> None:
    """A network namespace of its own, empty: no interface but a loopback that is down."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(_CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        print(f"cuda-agent client: unshare(CLONE_NEWNET) failed: {os.strerror(err)}", file=sys.stderr, flush=True)
        os._exit(71)


def _thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return -1


if __name__ == "__main__":
    main()
