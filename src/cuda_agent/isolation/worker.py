"""Parent side of an isolated child: spawn, watch memory and processes, explain death, kill.

The child runs in its own session (process group) and dies with its parent, so a kill takes
everything it started. Its stdout/stderr go to a file the parent reads only as an untrusted
log; results come over a private channel and are decoded without executing anything.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from .channel import ChannelError, ChannelTimeout, Reader
from .processes import remove_tree, start_detached_child
from .sandbox import memfd_bytes, memory_charged, process_tree, resident_bytes

LOG_TAIL_CHARS = 4000
WATCH_INTERVAL_S = 0.25  # /proc scans cost CPU the timed models share on small machines
MAPS_EVERY = 8  # looks between two reads of a watched process's mappings for memory files (~2 s)
_SIGNAL_HINTS = {"SIGSEGV": "segmentation fault", "SIGBUS": "bus error", "SIGABRT": "aborted",
                 "SIGKILL": "killed (likely out of memory)", "SIGFPE": "arithmetic fault",
                 "SIGILL": "illegal instruction", "SIGSYS": "forbidden system call"}


class WorkerDied(Exception):
    """The worker ended without saying why: crash, kill, limit. `reason` is readable."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class WatchedProcess:
    """A sandboxed child in its own session, watched from outside: its process tree and
    memory (`_watch`), why it died, its log tail, and a kill that reaches everything
    it started. Subclasses add the channel (a pipe for data workers, a socket for candidates).
    """

    def __init__(self, argv: list[str], *, env: dict[str, str], scratch: Path | None, log_prefix: str,
                 pass_fds: tuple[int, ...] = (), memory_limit_bytes: int = 1 << 62, who: str = "the worker",
                 stdin: Any = subprocess.DEVNULL, dies_with_parent: bool = True,
                 launch: Callable[[int], Any] | None = None) -> None:
        """`dies_with_parent=False` where the parent may be threaded (a `preexec_fn` is unsafe
        there): put `PDEATHSIG_PREFIX` in `argv` instead. `launch(log_fd)` may start the child
        another way (a fork server) and return a Popen-like handle; None falls back to `argv`."""
        self.scratch = scratch
        self.memory_limit = memory_limit_bytes
        # None: memory files are not counted; a set: they count against the limit too, less these (dev, inode),
        # the parent's own that it shared (the judge sets it for a candidate, its arena in it)
        self.memfd_exempt: set[tuple[int, int]] | None = None
        self.memory_group: Path | None = None  # a memory cgroup of its own: its peak counts too (`sandbox.watch_memory`)
        self._watches = 0
        self.who = who
        self._log = tempfile.NamedTemporaryFile(prefix=log_prefix, suffix=".log", delete=False)
        self._process_baseline: int | None = None
        self._last_watch = 0.0
        self._killed_for: str | None = None
        self._closers: list[Any] = []
        self.proc = (launch(self._log.fileno()) if launch is not None else None) or subprocess.Popen(
            argv, stdin=stdin, stdout=self._log, stderr=subprocess.STDOUT, pass_fds=pass_fds,
            preexec_fn=start_detached_child if dies_with_parent else None,
            start_new_session=not dies_with_parent, env=env, text=stdin is subprocess.PIPE,
            cwd=str(scratch) if scratch is not None else "/",  # `-m` puts the cwd first on sys.path: never a workspace
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    # ---- watching ---------------------------------------------------------------------
    def watch_processes(self) -> None:
        """From now on (candidate code is about to run) any new process in the tree kills
        it: kernels have no business starting programs."""
        self._process_baseline = len(process_tree(self.proc.pid))

    def _watch(self) -> None:
        now = time.monotonic()
        if self._killed_for or now - self._last_watch < WATCH_INTERVAL_S:
            return  # once killed, the reason stands (a later scan would find nothing and forget it)
        self._last_watch = now
        try:  # what is read is the process's own (its files' names, its maps): no look may raise (round 9, u1)
            tree = process_tree(self.proc.pid, max_age_s=WATCH_INTERVAL_S)  # one /proc scan for all watchers
            rss = resident_bytes(tree)
            if self.memfd_exempt is not None:  # mapped-only ones every MAPS_EVERY looks: reading `maps` holds the
                self._watches += 1             # process's memory map lock while it runs its timed calls
                rss += memfd_bytes(tree, self.memfd_exempt, mapped=self._watches % MAPS_EVERY == 1)
            if self.memory_group is not None:  # the kernel's highest count, between looks too, plus what it holds
                # charged elsewhere (pages it shares with the fork server it came from stay the server's:
                # red team round 11, m4, ~0.3 GiB past the limit between looks)
                peak, now = memory_charged(self.memory_group)
                rss = max(rss, peak + max(0, rss - now))
        except Exception as exc:  # noqa: BLE001 - anything its /proc entries make the reading do is its doing
            self._killed_for = f"{self.who}'s memory could not be read ({type(exc).__name__}: {exc})"
            self.kill()
            return
        if rss > self.memory_limit:
            self._killed_for = (f"out of memory: {self.who} used {rss / 2**30:.1f} GiB, over the "
                                f"{self.memory_limit / 2**30:.1f} GiB limit")
        elif self._process_baseline is not None and len(tree) > self._process_baseline:
            self._killed_for = ("forbidden: process creation: candidate code started a new process "
                                f"({len(tree) - self._process_baseline} more than before it was loaded)")
        if self._killed_for:
            self.kill()

    def _death_reason(self, problem: str) -> str:
        """Why the child stopped talking, for a person: what the watch killed it for, its signal,
        its exit status, or a hang."""
        if self._killed_for:
            return self._killed_for
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
            return f"{self.who} stopped talking ({problem})"
        if code < 0 or code > 128:  # killed, directly or as the child of `unshare` (128 + signal)
            sig = signal.Signals(-code if code < 0 else code - 128).name
            return f"crashed: {_SIGNAL_HINTS.get(sig, 'killed')} ({sig})"
        return f"{self.who} exited with status {code} before finishing ({problem})"

    def log_tail(self) -> str:
        """The log's last LOG_TAIL_CHARS bytes, read from there: the process writes the file, and
        one seek to just under its size limit made a sparse 1 GiB log that reading whole cost the
        judge 1-1.6 GiB and seconds per evaluation (red team round 6)."""
        try:
            with open(self._log.name, "rb") as fh:
                fh.seek(max(0, os.fstat(fh.fileno()).st_size - LOG_TAIL_CHARS))
                data = fh.read(LOG_TAIL_CHARS)
        except OSError:
            return ""
        return data.decode(errors="replace")

    def kill(self) -> None:
        kill_tree(self.proc)

    def close(self, kill: bool = True) -> None:
        """End it (`kill=False`: it was killed already; a second killpg after its exit could reach
        a new process group that reused its PID) and wait for it; then its scratch and log go."""
        if kill:
            self.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        remove_tree(self.scratch)  # the child's to fill: any depth, any count, never raises
        for closer in (*self._closers, self._log.close, lambda: os.unlink(self._log.name)):
            try:
                closer()
            except OSError:
                pass


class WorkerProcess(WatchedProcess):
    """A watched child that answers over a private pipe (see channel.py) and takes commands,
    one JSON line each, on its stdin. `argv` names the pipe's write end as `CHANNEL_FD`."""

    def __init__(self, argv: list[str], *, env: dict[str, str], scratch: Path, log_prefix: str,
                 memory_limit_bytes: int, who: str = "the worker", dies_with_parent: bool = True) -> None:
        read_fd, write_fd = os.pipe()
        super().__init__([str(write_fd) if a == CHANNEL_FD else a for a in argv], env=env, scratch=scratch,
                         log_prefix=log_prefix, pass_fds=(write_fd,), memory_limit_bytes=memory_limit_bytes,
                         who=who, stdin=subprocess.PIPE, dies_with_parent=dies_with_parent)
        os.close(write_fd)
        self.fd = read_fd
        self.reader = Reader(read_fd, on_wait=self._watch)
        self._closers = [lambda: os.close(self.fd), self._close_stdin]

    def command(self, line: str) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # the worker is gone; the next receive reports why

    def receive_by(self, deadline: float, timeout_reason: str) -> dict[str, Any]:
        try:
            return self.reader.receive(deadline)
        except ChannelTimeout:
            self.kill()
            raise WorkerDied(self._killed_for or timeout_reason) from None
        except ChannelError as exc:
            raise WorkerDied(self._death_reason(str(exc))) from None

    def _close_stdin(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()


CHANNEL_FD = "{channel_fd}"
"""Placeholder in a `WorkerProcess` argv for the number of the pipe the worker writes to."""


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
