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
to the judge, which is not the child's parent. The judge's side is `candidate_link.ForkServer`.
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
from typing import Any

MAX_MESSAGE = 1 << 20
_CLONE_NEWNET = 0x40000000


# ---- the server ---------------------------------------------------------------------------
def main() -> None:
    ctrl_fd, backend_name = int(sys.argv[1]), sys.argv[2]
    from .candidate import trusted_sys_path, warm_up_harness

    trusted_sys_path()
    import torch

    from ..backends import get_backend

    get_backend(backend_name)  # imported, never started: a started device can't be forked
    warm_up_harness(torch, "meta")  # the imports without a device or a thread: a meta tensor computes nothing
    import gc

    gc.collect()
    gc.freeze()  # torch's ~280k objects out of every later collection: a full one was ~0.15 s, at random, in a timed call
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
    from ..isolation.sandbox import _thread_count

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

    marks = [("begin", time.perf_counter())]
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
    marks.append(("namespace", time.perf_counter()))
    os.chdir(request["scratch"])
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile.tempdir = None  # read again from the client's TMPDIR
    from .candidate import serve

    serve(sock_fd, backend_name, marks, held=bool(request.get("held")))


def _unshare_network() -> None:
    """A network namespace of its own, empty: no interface but a loopback that is down."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(_CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        print(f"cuda-agent client: unshare(CLONE_NEWNET) failed: {os.strerror(err)}", file=sys.stderr, flush=True)
        os._exit(71)


if __name__ == "__main__":
    main()
