"""/proc/PID/task/TID/children is not a snapshot: a list longer than one page (~4 KiB: ~600-800
children of one thread, under TASKS_MAX = 1024) is read in several read() calls, and each call after
the first restarts *by position*; an entry before that position that goes away in between (a child
reaped) shifts the list, and the child at the page boundary, alive all along, is skipped
(fs/proc/array.c get_children_pid: "We might miss some children here ... it was never promised to be
accurate"). The scan of every process's stat (readdir of /proc by pid) never skips a process that
lives throughout.

Here a parent with 800 paused children (SIGCHLD ignored: reaped at exit) stands for a candidate
process; `sandbox.process_tree` is run with its reads of the children file split where the kernel
splits them, one first-page child killed between the two reads (a judge thread preempted there on a
loaded host, a child reaped meanwhile). The walk misses a child that never stopped existing; the
scan does not.
Run: /work/main/.venv/bin/python bench/redteam/review_2026-11-27s16/children_list_skip.py"""
import os
import signal
import subprocess
import sys
import time

from cuda_agent.isolation import sandbox

N = 800
code = (
    "import os, signal, sys\n"
    "signal.signal(signal.SIGCHLD, signal.SIG_IGN)\n"
    f"for _ in range({N}):\n"
    "    if os.fork() == 0:\n"
    "        signal.pause(); os._exit(0)\n"
    "print('up', flush=True); signal.pause()\n")
parent = subprocess.Popen([sys.executable, "-S", "-c", code], stdout=subprocess.PIPE, text=True)
try:
    assert parent.stdout.readline().strip() == "up"
    with open(f"/proc/{parent.pid}/task/{parent.pid}/children") as fh:
        listed = [int(x) for x in fh.read().split()]
    assert len(listed) == N, len(listed)
    first_page = []
    killed = []

    class SplitRead:
        """The file as the kernel serves it (one page a read() call), a child reaped between calls."""

        def __init__(self, path):
            self.fd = os.open(path, os.O_RDONLY)
            self.path = path

        def __enter__(self):
            return self

        def __exit__(self, *a):
            os.close(self.fd)

        def read(self):
            parts = [os.read(self.fd, 8192)]
            if self.path.endswith(f"/{parent.pid}/children") and not killed:
                first_page.extend(int(x) for x in parts[0].split())
                victim = first_page[10]  # a child the walk already listed
                os.kill(victim, signal.SIGKILL)
                killed.append(victim)
                while os.path.exists(f"/proc/{victim}"):
                    time.sleep(0.001)
            while True:
                more = os.read(self.fd, 8192)
                if not more:
                    break
                parts.append(more)
            return b"".join(parts).decode()

    sandbox.open = lambda path, *a, **k: SplitRead(path)  # module-level name: only sandbox's own reads
    try:
        walked = sandbox.process_tree(parent.pid)
    finally:
        del sandbox.open
    sandbox._CHILDREN_LISTS, saved = False, sandbox._CHILDREN_LISTS
    scanned = sandbox.process_tree(parent.pid)
    sandbox._CHILDREN_LISTS = saved
    alive_throughout = set(listed) - set(killed)
    missed_walk = sorted(alive_throughout - set(walked))
    missed_scan = sorted(alive_throughout - set(scanned))
    print(f"first read() returned {len(first_page)} of {N} children; killed {killed} between the reads")
    print(f"walk : {len(walked) - 1} children, missed alive ones: {missed_walk} "
          f"(index {[listed.index(p) for p in missed_walk]} of the original list)")
    print(f"scan : {len(scanned) - 1} children, missed alive ones: {missed_scan}")
    for p in missed_walk:
        print(f"  {p} alive: {os.path.exists(f'/proc/{p}')}, state {open(f'/proc/{p}/stat').read().split(')')[1].split()[0]}")
finally:
    for pid in sandbox.process_tree(parent.pid)[::-1]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    parent.wait()
