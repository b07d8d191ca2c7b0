"""Process hygiene shared by every long run (optimize, bench, data): children die with their
parent, on SIGKILL too, and two runs never share one output folder.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

_PR_SET_PDEATHSIG = 1
SRC_ROOT = str(Path(__file__).resolve().parents[2])


def child_environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """A copy of `env` (default: this process's) whose PYTHONPATH starts with the source root
    this code was imported from, so a child started with `-m cuda_agent...` runs the same code."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (SRC_ROOT, env.get("PYTHONPATH", "")) if p)
    return env


def die_with_parent(parent: int | None = None) -> None:
    """Ask Linux to SIGKILL this process when its parent dies (PR_SET_PDEATHSIG); exit at once if
    `parent` (the pid that started us) is already gone."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if parent is not None and os.getppid() != parent:  # the parent died before the request took
        os._exit(0)


def start_detached_child() -> None:
    """preexec_fn: its own session (one signal reaches all it starts), SIGKILLed when its
    starter dies, even by SIGKILL. Only for a single-threaded starter (see PDEATHSIG_PREFIX)."""
    os.setsid()
    die_with_parent()


_SETPRIV = shutil.which("setpriv") if sys.platform.startswith("linux") else None
PDEATHSIG_PREFIX: tuple[str, ...] = (_SETPRIV, "--pdeathsig", "KILL") if _SETPRIV else ()
"""argv prefix (util-linux `setpriv`) that makes an exec'd command die with the process (thread)
that started it: it survives the exec, unlike a session or group."""


def remove_tree(path: str | os.PathLike[str] | None, *, wait: bool = True) -> threading.Thread | None:
    """Remove a tree that a candidate or an agent could write (scratch, a workspace) and never
    raise: its depth, its number of files and its modes are theirs to choose. `rm -rf` walks any
    depth without recursion in this process (shutil.rmtree raised RecursionError at 3,000 nested
    folders, out of the judge's cleanup: red team round 8) and never follows a link; where a
    folder without rights stopped it (not as root: rm ignores modes there), those folders, found
    without following links or crossing file systems, get their owner's rights and it tries once
    more. `wait=False` removes it on a thread of its own and returns that thread, for a caller
    that must answer now and wait later (`Judge.reap_retired`)."""
    if path is None or not os.path.lexists(path):
        return None
    target = os.fspath(path)

    def run() -> None:
        quiet: dict[str, Any] = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL,
                                 "stderr": subprocess.DEVNULL, "check": False}
        try:
            if subprocess.run(["rm", "-rf", "--one-file-system", "--", target], **quiet).returncode == 0:
                return
            if os.geteuid() != 0 and os.path.isdir(target) and not os.path.islink(target):
                subprocess.run(["find", "-P", target, "-xdev", "-type", "d", "!", "-perm", "-u=rwx",
                                "-exec", "chmod", "u+rwx", "{}", "+"], **quiet)
                subprocess.run(["rm", "-rf", "--one-file-system", "--", target], **quiet)
        except Exception:  # noqa: BLE001 - no rm here (OSError): the stdlib's walk, as deep as it gets
            try:
                shutil.rmtree(target, ignore_errors=True)
            except Exception:  # noqa: BLE001 - RecursionError on a deep tree: it stays, nothing raises
                pass

    if not wait:
        thread = threading.Thread(target=run, name="remove-tree", daemon=True)
        try:
            thread.start()
            return thread
        except RuntimeError:  # no thread to be had: do it now
            pass
    run()
    return None


class RunBusy(RuntimeError):
    """Another live run holds the folder's lock."""


class RunLock:
    """Exclusive `flock` on `folder/.lock` for one run (`with RunLock(out): ...`); the kernel
    drops it when the holder dies, so a stale lock cannot outlive a killed run."""

    NAME = ".lock"

    def __init__(self, folder: str | Path, what: str = "run"):
        self.folder = Path(folder)
        self.what = what
        self._fd: int | None = None

    def acquire(self) -> "RunLock":
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / self.NAME
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise RunBusy(f"another {self.what} (pid {holder}) is using {self.folder}; wait for it to end or "
                              "choose another output folder") from None
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.release()


class Terminated(BaseException):
    """SIGTERM arrived; raised in the main thread so clean-up runs (not an `Exception`: code
    that records failures as data must not swallow it)."""


def terminate_on_sigterm() -> None:
    """Turn SIGTERM into `Terminated` in the main thread (call from the main thread)."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise Terminated(f"terminated by signal {signum}")

    signal.signal(signal.SIGTERM, handler)


__all__ = ["die_with_parent", "start_detached_child", "PDEATHSIG_PREFIX", "RunLock", "RunBusy", "Terminated", "terminate_on_sigterm"]
