"""The judge's handle on one candidate process: spawn it sandboxed, talk over a private
socket with deadlines, freeze it while the judge works, watch it from /proc, kill it.

The candidate runs in its own session (so one signal reaches everything it started), dies
with the judge (parent-death signal), in a new network namespace where the OS allows, with a
scrubbed environment and a scratch dir as its only writable place (`isolation.worker`). It is
forked from the judge's fork server where one runs (`ForkServer` here, `forkserver.py` there),
else started as a new interpreter.
"""

from __future__ import annotations

import functools
import json
import math
import operator
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import suppress
from pathlib import Path
from typing import Any, Callable, Iterable, TypeVar

from ..isolation.worker import WatchedProcess
from ..isolation.sandbox import (CANDIDATE_NAMESPACE_PREFIX, CONFINE_WRITES_ENV, limit_tasks, make_scratch, namespaces_available,
                                 process_tree, release_tasks, scrubbed_environment, watch_memory)

MAX_MESSAGE = 1 << 22
T = TypeVar("T")


class CandidateDied(Exception):
    """The candidate ended, hung or broke the protocol; `reason` is readable."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class CandidateLink(WatchedProcess):
    """One candidate process. It starts torch and the device at once, then waits for its
    request, so a spare started ahead of time hides that from the next evaluation. Given a
    ready `forkserver`, the process is forked from it (torch already imported) instead."""

    def __init__(self, backend: str, env: dict[str, str], isolate: bool = True, confine_writes: bool = True,
                 forkserver: Any = None, held: bool = False) -> None:
        self.backend = backend
        self.isolate = isolate  # what was asked for; `namespaces` is what the host could give
        self.confine_writes = confine_writes  # Landlock on writes before any thread starts
        self.namespaces = isolate and namespaces_available()
        scratch = make_scratch(Path(tempfile.mkdtemp(prefix="cuda-agent-scratch-")))
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = ours
        env = scrubbed_environment(env, scratch, {CONFINE_WRITES_ENV: "1"} if confine_writes else {})
        launch = None
        if forkserver is not None:
            def launch(log_fd: int) -> Any:
                return forkserver.fork(theirs.fileno(), log_fd, scratch, env, self.namespaces, held)
        super().__init__(
            [*(CANDIDATE_NAMESPACE_PREFIX if self.namespaces else ()),
             sys.executable, "-m", "cuda_agent.evaluation.candidate", str(theirs.fileno()), backend],
            env=env, scratch=scratch, log_prefix="cuda-agent-candidate-",
            pass_fds=(theirs.fileno(),), who="the candidate process", launch=launch)
        theirs.close()
        self.forked = not isinstance(self.proc, subprocess.Popen)  # then no `unshare` stands between
        self._closers = [self.sock.close]
        self.tree = FrozenTree(self.proc.pid)
        self._closers.append(self.tree.close)
        # at most TASKS_MAX threads and processes, where the host has a pids cgroup for it (red team round 7)
        self.tasks_group = limit_tasks(self.proc.pid)
        self._closers.append(lambda: release_tasks(self.tasks_group))
        # its memory's peak, counted in every look once it is a candidate's (`memory_group`); a
        # baseline client runs trusted code under the resident count alone
        self.memory_cgroup = watch_memory(self.proc.pid, self.tasks_group)
        if self.memory_cgroup != self.tasks_group:
            self._closers.append(lambda: release_tasks(self.memory_cgroup))
        self._started = False  # it said "spare": torch imported, the device started
        # held: forked for a later evaluation, it starts the driver, says "held" and waits for `go` (no context, so
        # no device memory, until then); only a forked process is held (a new interpreter starts at once)
        self.held = held and self.forked
        self.driver_up = False  # it said "held"
        # from "go" to its "spare", by its own steps after "held" (None where it was never held; the judge reads
        # "spare" only when it takes the spare: timed from here, it was the reference phase's end)
        self.up_after_go_s: float | None = None
        self.born = time.monotonic()
        self.start_s: float | None = None  # seconds from its start to its "spare" (seen by `started`)
        self.start_steps: dict[str, float] = {}  # its start's steps, as it said (`_note_started`)

    def go(self) -> None:
        """Let a held process make its device context and start (nothing where it is not held)."""
        if self.held:
            self.held = False
            self.send({"type": "go"})

    def started(self) -> bool:
        """Whether the process has said it is started (never waits)."""
        while not self._started and self.alive() and select.select([self.sock], [], [], 0)[0]:
            try:
                self._note_started(self.receive(time.monotonic() + 1.0, "starting"))
            except CandidateDied:
                break
        return self._started

    def await_held(self, deadline: float) -> None:
        """Wait until a held process has started its driver (its "held"; CandidateDied if it never
        says so): nothing of its start is left to run beside a timed interval."""
        while self.held and not self.driver_up:
            if self._note_started(self.receive(deadline, "starting")):
                raise CandidateDied("the client process broke the protocol while held")

    def await_started(self, deadline: float) -> None:
        """Wait for the process's "spare" message (CandidateDied when it never comes)."""
        if self.held:
            raise CandidateDied("the client process is held: it starts once told to go")
        while not self._started:
            msg = self.receive(deadline, "starting")
            if not self._note_started(msg) and msg.get("type") != "held":
                raise CandidateDied("the client process broke the protocol while starting")

    def _note_started(self, msg: dict[str, Any]) -> bool:
        """Whether `msg` is its "spare"; then started, with how long that took (and, as the
        process said, on what: a claim, kept for diagnosis). A "held" is noted too."""
        if msg.get("type") == "held":
            self.driver_up = True
        elif msg.get("type") == "spare":
            self._started = True
            self.start_s = round(time.monotonic() - self.born, 3)
            steps = msg.get("steps_s")  # the spare's own code said it, before any candidate code existed
            self.start_steps = steps if isinstance(steps, dict) else {}
            self.up_after_go_s = _steps_after(self.start_steps, "held")
        return self._started

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
        except (ValueError, RecursionError):  # nested 100,000 deep: the decoder's recursion (round 5, j1)
            raise CandidateDied("the candidate process sent a malformed message") from None
        if not isinstance(msg, dict) or not _shallow(msg):
            raise CandidateDied("the candidate process sent a malformed message")
        return msg

    def _watch(self) -> None:
        """The resident-memory and process watch, and: a candidate the judge did not stop is
        never stopped. One that sent itself SIGSTOP while loading cost the whole 180 s load limit
        (red team round 7, l1): it is ended at the next look, its verdict said at once."""
        super()._watch()
        if not self._killed_for and not self.tree.frozen and self.proc.poll() is None and _stopped(self.pid()):
            self._killed_for = "the candidate process stopped itself (SIGSTOP); only the judge stops it"
            self.kill()

    def look(self, force: bool = False) -> None:
        """A look (`_watch`, at most every WATCH_INTERVAL_S) between answers: the look in
        `receive` comes only when an answer is 0.25 s late, and a candidate whose answers were
        fast was never looked at after it loaded (red team round 9, m1: 1.9 GiB of memory
        files held against a 1 GiB limit). `force`: now, whenever the last was (before a verdict).
        CandidateDied when it was killed for what it saw."""
        if force:
            self._last_watch = 0.0
        self._watch()
        if self._killed_for:
            raise CandidateDied(self._killed_for)

    # ---- control from outside ------------------------------------------------------------
    def pid(self) -> int:
        """The host PID of the Python process (inside the namespaces it is PID 1)."""
        if not self.namespaces or self.forked:  # no scan of /proc where the answer is known (~5 ms each on
            return self.proc.pid  # an H100 host, seven an evaluation: issue 23, sixteenth session)
        tree = process_tree(self.proc.pid)
        return tree[-1] if len(tree) > 1 else self.proc.pid

    def freeze(self, confirm_tree: bool = True) -> bool:
        """Stop every thread of the candidate while the judge times its own models: nothing
        it left running on the CPU can slow the baselines or work ahead. False when some
        thread still runs (the judge refuses such a candidate). `confirm_tree`: look for
        processes it started since (False for the baseline client: trusted, it starts none)."""
        return self.tree.freeze(confirm_tree)

    def mark_done(self) -> None:
        """Its "done" arrived: what it runs from now to its stop is measured (`FrozenTree`)."""
        self.tree.mark_done()

    def stopped_at_once(self) -> bool:
        """Whether the last freeze found it idle since its "done" and stopped at once."""
        return self.tree.stopped_at_once

    def cpu_after_done_ns(self) -> int:
        """What it ran from its last "done" to its stop (ns of CPU)."""
        return self.tree.cpu_after_done_ns

    def thaw(self) -> None:
        self.tree.thaw()

    def stopped_at(self) -> float:
        """perf_counter() when the last freeze saw every thread stopped."""
        return self.tree.stopped_at

    def still_frozen(self) -> bool:
        return self.tree.still_frozen()

    def cpu_ns(self) -> int:
        """CPU time of the candidate's processes, threads that ended included, in ns."""
        return self.tree.cpu_ns()

    def capabilities(self, bounding: bool = True) -> dict[str, int]:
        """Thread id -> its effective, permitted and ambient capabilities (and `bounding`: its
        bounding set) OR-ed together, read from /proc."""
        names = ("CapEff", "CapPrm", "CapAmb", *(("CapBnd",) if bounding else ()))

        def caps(text: str) -> int:
            fields = dict(ln.split(":", 1) for ln in text.splitlines() if ":" in ln)
            return functools.reduce(operator.or_, (int(fields.get(n, "0"), 16) for n in names), 0)

        return _per_thread(self.pid(), "status", caps)

    def syscall_filters(self) -> list[tuple[str, int, int | None]]:
        """(thread id, seccomp mode, filter count) of every thread of the candidate's Python
        process, read from /proc: what is enforced, not what the process says it did."""
        out = []
        status = _per_thread(self.pid(), "status",
                             lambda text: dict(ln.split(":", 1) for ln in text.splitlines() if ":" in ln))
        for tid, fields in status.items():
            if "Seccomp" in fields:
                count = fields.get("Seccomp_filters")
                out.append((tid, int(fields["Seccomp"]), int(count) if count is not None else None))
        return out


class FrozenTree:
    """Freezes and thaws the process tree under `root` and reads its CPU, scanning /proc only
    when the tree can have changed. Each process is signalled by PID as well as by group: one
    that left the group (setpgid; the sandbox denies it too) is stopped all the same."""

    STOP_LIMIT_S = 2.0  # SIGSTOP lands when a thread next runs: room for a loaded host
    # a thread shows "T" as it stops, and its CPU counter moves once more as it is switched out: read twice
    # back to back, a stopping thread on a vCPU the host paused in between looked stopped, and its counter
    # moved after (an honest client "resumed while frozen": once in ~22,000 freezes on the 2-core CPU box, once in issue 23's
    # H100 runs). The second read comes this long after the first
    SWITCH_OUT_S = 0.0005
    # stopped "at once", where the interval may end at the client's "done" (`_CandidateSession.ends_at_stop`):
    # every thread asleep in a wait (or stopped) at a look right after "done", within SETTLE_S (an honest client
    # is a few system calls from its next receive; red team round 13) ...
    SETTLE_S = 0.0002
    # ... the client's processes used at most this CPU from "done" (`mark_done`) to the signal, the look's own
    # length included (red team round 14, w2: a look the candidate stretched, while a thread it had read asleep
    # worked) ...
    CPU_BEFORE_SIGNAL_NS = 200_000
    # ... no thread used more than this from its look to its stop, its taking of the signal (a sleeping thread is
    # woken for it: 1-2 us median, up to ~50 measured), per thread: a pooled allowance was bought with 1000 idle
    # threads and spent by one inside a long preadv (red team round 15, p2: reward 3) ...
    CPU_PER_THREAD_NS = 50_000
    # ... except the few that carry out the group stop, waking every other thread (~1 us each: 0.4 ms for the
    # first of 400 sleeping threads; each SIGSTOP that lands while the stop is under way makes another leader).
    # Read after the switch-out (SWITCH_OUT_S) the leader's counter holds its whole stop: 2.0-2.6 us a thread
    # for 200 idle threads on the 2-core CPU box, over 1.5 in 1 freeze of 3 (an honest pool not "at once")
    STOP_LEADERS = 3
    CPU_LEADER_NS = 100_000
    CPU_LEADER_PER_THREAD_NS = 3_000
    # ... and it was seen stopped within this of the signal (a device transfer runs on without CPU in the thread;
    # the judge's own scan of /proc grows with the threads, and a second scan follows where a counter moved as
    # its thread was switched out: 200 idle threads 6.4-9.4 ms median on the 2-core CPU box, 30 us a thread
    # left a third of their freezes out: round 14, h2). Both shares per thread are what a candidate's idle
    # threads buy it (1000 of them: 3.1 ms of CPU in one thread, 52 ms of wall), the price of
    # not charging an honest pool the judge's scan; a freeze whose cost is the judge's (the cgroup freezer) is
    # the principle that would end it
    AT_ONCE_S = 0.002
    AT_ONCE_PER_THREAD_S = 0.00005

    def __init__(self, root: int) -> None:
        self.root = root
        self.frozen = False
        self._stopped: dict[int, dict[str, tuple[int, ...]]] | None = None  # see _wait_stopped
        self._scanned_at: int | None = None  # the last PID allocated before the tree's last scan
        self._pidfds: dict[int, int] = {}
        self._done_cpu: dict[int, int] | None = None  # each process's CPU ns at its last "done" (`mark_done`)
        self.stopped_at = 0.0  # perf_counter() when the last freeze saw the tree stopped
        self.stopped_at_once = False  # whether the last freeze found it idle since "done" and stopped at once
        self.cpu_after_done_ns = 0  # what the tree ran from its "done" (or the signal) to its stop, last freeze
        # whether a thread was seen in an uninterruptible wait while the last freeze waited for the stop: a transfer
        # the device does (an O_DIRECT read's DMA) runs on without CPU in the thread, and then no stop is "at once"
        # (red team round 16, d1)
        self.blocked = False

    def mark_done(self) -> None:
        """The client said "done": read its processes' CPU clocks now (one system call each,
        exact whatever its threads are doing), so the freeze can tell what it ran after."""
        if not self.frozen:
            self._done_cpu = {pid: _process_ns([pid]) for pid in self._known()}

    def freeze(self, confirm_tree: bool = True) -> bool:
        """Stop the tree; False when some thread of it still runs at the limit. `confirm_tree`:
        rescan for processes started since the last scan where a PID was allocated meanwhile."""
        if not self.frozen:
            tree = self._known()
            look = self._asleep(tree)
            at_signal = {pid: _process_ns([pid]) for pid in tree}
            since = self._done_cpu if self._done_cpu is not None else at_signal
            self._done_cpu = None
            sent = time.perf_counter()
            self._signal(signal.SIGSTOP, tree)
            self.frozen = True
            self.blocked = False
            self._stopped = self._wait_stopped(tree, confirm_tree)
            self.stopped_at_once = False
            if self._stopped is not None:
                # a process that joined since "done" counts whole (the reads before lack it)
                before = sum(at_signal[pid] - since.get(pid, 0) for pid in tree)
                self.cpu_after_done_ns = before + sum(_process_ns([pid]) - at_signal.get(pid, 0) for pid in self._stopped)
                threads = sum(len(t) for t in self._stopped.values())
                self.stopped_at_once = (
                    look is not None and not self.blocked and before <= self.CPU_BEFORE_SIGNAL_NS
                    and self._each_thread_idle(look, threads)
                    and self.stopped_at - sent <= self.AT_ONCE_S + self.AT_ONCE_PER_THREAD_S * threads)
        return self._stopped is not None

    def _each_thread_idle(self, look: dict[int, dict[str, int]], counted: int) -> bool:
        """Every thread seen stopped was in the look, and ran from it to its stop no more than
        its share of the stop: the STOP_LEADERS busiest each up to CPU_LEADER_NS +
        CPU_LEADER_PER_THREAD_NS per thread, every other one CPU_PER_THREAD_NS."""
        ran = []
        for pid, by_thread in (self._stopped or {}).items():
            for tid, counters in by_thread.items():
                if tid not in look.get(pid, {}):
                    return False  # started after the look: it ran
                ran.append(counters[0] - look[pid][tid])
        ran.sort(reverse=True)
        leaders = self.CPU_LEADER_NS + self.CPU_LEADER_PER_THREAD_NS * counted
        return all(r <= leaders for r in ran[:self.STOP_LEADERS]) and \
            all(r <= self.CPU_PER_THREAD_NS for r in ran[self.STOP_LEADERS:])

    def _asleep(self, tree: list[int]) -> dict[int, dict[str, int]] | None:
        """Each thread's CPU ns by process, once every thread of the tree is asleep in a wait
        (or stopped) within SETTLE_S; None where some thread still ran. A sleeping thread's
        counter is exact (a running one's lags by up to a tick: read late, it can only make a
        thread look as if it ran more)."""
        end = time.perf_counter() + self.SETTLE_S
        while not all(s in "TtZXS" for pid in tree for s in _thread_states(pid)):
            if time.perf_counter() > end:
                return None
        return {pid: {tid: c[0] for tid, c in _thread_counters(pid).items()} for pid in tree}

    def thaw(self) -> None:
        if self.frozen:
            self._signal(signal.SIGCONT, self._known())
            self.frozen = False

    def _known(self) -> list[int]:
        """The last freeze's tree where it stopped whole, else a fresh /proc scan."""
        return list(self._stopped) if self._stopped else process_tree(self.root)

    def _wait_stopped(self, tree: list[int], confirm_tree: bool = True) -> dict[int, dict[str, tuple[int, ...]]] | None:
        """SIGSTOP lands asynchronously, and /proc's CPU counters of a running thread lag: wait
        until every thread of the process tree is stopped, so CPU read from now on is CPU used
        while frozen. Returns each stopped thread's CPU counters by process (`still_frozen` and
        `cpu_ns` compare against them), or None when some thread still runs at the limit;
        `stopped_at` is when the tree was seen stopped.

        A tree whose every thread is stopped cannot change, and a process or thread joins it
        only with a new PID: when none was allocated in the judge's PID namespace since the
        tree was last scanned, `tree` stands; else one /proc scan confirms it. Counters that
        still move (a thread shows stopped a moment before it is switched out) mean the wait
        goes on; SIGSTOP is sent again on every poll, since a candidate can aim SIGCONT at itself
        (a red-team candidate armed timers to)."""
        end = time.monotonic() + self.STOP_LIMIT_S
        while time.monotonic() < end:
            states = [s for pid in tree for s in _thread_states(pid)]
            self.blocked = self.blocked or "D" in states  # an uninterruptible wait: I/O the device does for it
            if not all(s in "TtZX" for s in states):
                time.sleep(0.0002)
                self._signal(signal.SIGSTOP, tree)  # again: a SIGCONT the candidate aimed at itself undid it
                continue
            seen_at, counters = time.perf_counter(), {pid: _thread_counters(pid) for pid in tree}
            mark = _last_pid()
            if confirm_tree and not (self._stopped and mark is not None and mark == self._scanned_at):
                now = process_tree(self.root)
                if set(now) != set(tree):
                    self._signal(signal.SIGSTOP, [pid for pid in now if pid not in tree])  # started before it stopped
                    tree = now
                    continue
                self._scanned_at = mark
            time.sleep(self.SWITCH_OUT_S)
            if {pid: _thread_counters(pid) for pid in tree} == counters:
                self.stopped_at = seen_at
                return counters
        self._scanned_at = None
        return None

    def still_frozen(self) -> bool:
        """No thread of the tree has run since it was seen stopped (any run moves its counters)."""
        return self.frozen and self._stopped is not None and \
            {pid: _thread_counters(pid) for pid in self._stopped} == self._stopped

    def cpu_ns(self) -> int:
        """CPU time of the tree's processes in ns, from each one's CPU clock: threads that ended
        count too (per-thread /proc counters lose them). While frozen, the threads seen stopped
        are re-read; only when one of them ran since (or a thread came or went) can the tree
        have changed, and /proc is scanned for it again."""
        if self.still_frozen():
            return _process_ns(self._stopped)  # type: ignore[arg-type]
        return _process_ns(process_tree(self.root))

    def _signal(self, sig: int, pids: list[int]) -> None:
        """To the group, and to each process through a pidfd held since it was first seen (a
        PID that ended and was reused by another process is not signalled)."""
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(self.root, sig)
        for pid in pids:
            with suppress(OSError):
                if pid not in self._pidfds:
                    self._pidfds[pid] = os.pidfd_open(pid)
                signal.pidfd_send_signal(self._pidfds[pid], sig)

    def close(self) -> None:
        for fd in self._pidfds.values():
            os.close(fd)
        self._pidfds.clear()


MESSAGE_DEPTH = 32  # the harness's messages nest a few levels (output descriptions); more is not its


def _shallow(msg: Any) -> bool:
    """Whether a decoded message nests at most MESSAGE_DEPTH deep (walked without recursion, so
    no later reader of it can recurse into a RecursionError on the judge's side)."""
    level, depth = [msg], 0
    while level:
        depth += 1
        if depth > MESSAGE_DEPTH:
            return False
        level = [v for x in level for v in (x.values() if isinstance(x, dict) else x)
                 if isinstance(v, (dict, list))]
    return True


def _process_ns(pids: Iterable[int]) -> int:
    """Sum of the processes' CPU clocks (clock_getcpuclockid's id: ~pid << 3 | CPUCLOCK_SCHED)."""
    total = 0
    for pid in pids:
        try:
            total += time.clock_gettime_ns(((~pid) << 3) | 2)
        except OSError:  # it ended
            pass
    return total


def _last_pid() -> int | None:
    """The last PID allocated in this process's PID namespace (None where /proc hides it)."""
    try:
        with open("/proc/sys/kernel/ns_last_pid") as fh:
            return int(fh.read())
    except (OSError, ValueError):
        return None


def _thread_states(pid: int) -> list[str]:
    """Each thread's scheduler state letter (R, S, T, Z ...) from /proc; empty for a gone process."""
    return list(_per_thread(pid, "stat", lambda text: text[text.rindex(")") + 2]).values())


def _stopped(pid: int) -> bool:
    """Every thread of the living process `pid` is stopped (a gone or dead one is not)."""
    states = _thread_states(pid)
    return bool(states) and all(s in "Tt" for s in states)


def _thread_counters(pid: int) -> dict[str, tuple[int, ...]]:
    """Per thread of `pid`: (ns on the CPU, time slices run), from /proc schedstat; any run of
    the thread moves both."""
    return _per_thread(pid, "schedstat", lambda text: (int(text.split()[0]), int(text.split()[2])))


def _per_thread(pid: int, name: str, parse: Callable[[str], T]) -> dict[str, T]:
    """`parse` of /proc/<pid>/task/<tid>/<name> for every thread of `pid`; a thread that just
    ended, or whose file does not parse, is left out."""
    out: dict[str, T] = {}
    for tid in _thread_ids(pid):
        try:
            with open(f"/proc/{pid}/task/{tid}/{name}", "rb") as fh:  # a thread's name is the candidate's: any bytes
                out[tid] = parse(fh.read().decode("utf-8", "replace"))
        except (OSError, ValueError, IndexError):
            continue
    return out


def _thread_ids(pid: int) -> list[str]:
    """The threads of `pid` (none once it is gone)."""
    try:
        return os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []


def pin_threads(pid: int, core: int) -> None:
    """Every thread of `pid` to `core` (threads it starts later inherit it); a thread that
    ended meanwhile is skipped."""
    for tid in _thread_ids(pid):
        try:
            os.sched_setaffinity(int(tid), {core})
        except OSError:
            pass


# ---- the fork server's handle (the server itself: forkserver.py) ------------------------------
FORKSERVER_READY_S = 180.0  # torch's import on a loaded host
FORK_TIMEOUT_S = 10.0
EXIT_STATUS_WAIT_S = 2.0  # the server reaps a child when it is told (SIGCHLD): moments after it ended


class ForkServer(WatchedProcess):
    """The judge's handle on its fork server (spawned, logged, killed like any watched child);
    `fork` gives a Popen-like `ForkedProcess`, or None when this server can't fork (not
    started, dead, or refusing): then start the client anew."""

    def __init__(self, backend: str, env: dict[str, str]) -> None:
        scratch = make_scratch(Path(tempfile.mkdtemp(prefix="cuda-agent-forkserver-")))
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = ours
        # the clients' own variables, so what torch, OpenMP and glibc's malloc read once at start
        # agree; numpy's OpenBLAS would start its thread pool at import (a thread: no fork)
        super().__init__([sys.executable, "-m", "cuda_agent.evaluation.forkserver", str(theirs.fileno()), backend],
                         env=scrubbed_environment(env, scratch, {"OPENBLAS_NUM_THREADS": "1"}), scratch=scratch,
                         log_prefix="cuda-agent-forkserver-", pass_fds=(theirs.fileno(),), who="the fork server")
        theirs.close()
        self._closers = [self.sock.close]
        self.born = time.monotonic()
        self._ready = False
        self._broken = False
        self._exits: dict[int, int] = {}

    def alive(self) -> bool:
        return not self._broken and super().alive()

    def ready(self, wait_s: float = 0.0) -> bool:
        """Whether it has said it is ready (waits up to `wait_s` for that)."""
        deadline = time.monotonic() + wait_s
        while not self._ready and self.alive():
            msg = self._next(deadline)
            if msg is None:
                break
        return self._ready and self.alive()

    def fork(self, sock_fd: int, log_fd: int, scratch: Path, env: dict[str, str], net_namespace: bool,
             held: bool = False) -> "ForkedProcess | None":
        """A new client process serving `sock_fd`, or None (the caller starts one the old way).
        `held`: it starts the driver and waits to be told to go (`CandidateLink.go`)."""
        if not self.ready(FORKSERVER_READY_S - (time.monotonic() - self.born)):
            return None
        request = {"type": "fork", "scratch": str(scratch), "env": env, "net_namespace": net_namespace,
                   "held": held}
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
        """The next message (an exit report is also filed in `_exits`), or None at the deadline
        or when the server is gone."""
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
            if msg.get("type") == "ready":
                self._ready = True
            msg["fds"] = list(fds)
            if not want_fds:
                for fd in fds:
                    os.close(fd)
            return msg


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


def _steps_after(steps: dict[str, Any], mark: str) -> float | None:
    """The seconds of a client's reported start steps after `mark` (in the order it said them);
    None where `mark` is missing or a step is no number (a claim: for diagnosis only)."""
    names = list(steps)
    if mark not in names:
        return None
    after = [steps[name] for name in names[names.index(mark) + 1:]]
    if not all(isinstance(v, (int, float)) and math.isfinite(v) and v >= 0 for v in after):
        return None
    return round(sum(after), 3)
