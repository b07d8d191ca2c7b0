"""What the judge pays to freeze a candidate and read its CPU, per timing round: the way
before (every freeze poll and every `cpu_ns` rescanned all of /proc) against the way now (the
stopped tree's threads are re-read; /proc is scanned once per freeze), alternating round by
round on one real candidate process, so drift hits both sides alike.

    python bench/freeze_bench.py --rounds 300 --busy 500 --out bench/results/freeze_bench.json
    python bench/freeze_bench.py --rounds 300 --busy 500 --threads 24

With `--threads N` the candidate is a stand-in: one Python process, in its own session, whose
N threads keep working while thawed (a loaded candidate with torch's thread pools busy);
without it, a real spare candidate process (torch imported, waiting for its request).

A round is what `judge.py` does to one client per timed batch: freeze after the run, thaw and
freeze around the release, and `cpu_ns` before and after the judge's own interval. `--busy N`
starts N idle processes, so /proc looks like a shared host's.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cuda_agent.evaluation import candidate_link
from cuda_agent.evaluation.candidate_link import CandidateLink, FrozenTree
from cuda_agent.isolation import sandbox

SCANS = {"n": 0}


def counted_tree(root: int) -> list[int]:
    SCANS["n"] += 1
    return sandbox.process_tree(root)


class Before:
    """The judge's freeze and `cpu_ns` as they were (commit e9391bb), on the same process."""

    def __init__(self, root: int) -> None:
        self.root = root

    def freeze(self) -> None:
        os.killpg(self.root, signal.SIGSTOP)
        end = time.monotonic() + 0.05
        while time.monotonic() < end:
            running = False
            for pid in counted_tree(self.root):
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
        os.killpg(self.root, signal.SIGCONT)

    def cpu_ns(self) -> int:
        total = 0
        for pid in counted_tree(self.root):
            try:
                for tid in os.listdir(f"/proc/{pid}/task"):
                    with open(f"/proc/{pid}/task/{tid}/schedstat") as fh:
                        total += int(fh.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue
        return total


STAND_IN = """
import threading, time
def work():
    while True:
        sum(range(2000))
        time.sleep(0.0005)
for _ in range({n}):
    threading.Thread(target=work, daemon=True).start()
time.sleep(3600)
"""


def stand_in(threads: int) -> subprocess.Popen:
    """A process in its own session with `threads` working threads."""
    return subprocess.Popen([sys.executable, "-c", STAND_IN.format(n=threads)], start_new_session=True)


def one_round(side: Any) -> tuple[float, float, int]:
    """(wall ms, judge CPU ms, /proc scans) of one timing round's freezes and CPU reads."""
    SCANS["n"] = 0
    side.thaw()
    time.sleep(0.002)  # the candidate's timed run
    w0, c0 = time.perf_counter(), time.process_time()
    side.freeze()
    side.thaw()  # release
    side.freeze()
    before = side.cpu_ns()
    after = side.cpu_ns()  # the judge's own interval is between these
    wall, cpu = (time.perf_counter() - w0) * 1e3, (time.process_time() - c0) * 1e3
    if after != before:
        print(f"the frozen candidate used {(after - before) / 1e6:.3f} ms of CPU", file=sys.stderr)
    return wall, cpu, SCANS["n"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--busy", type=int, default=0, help="idle processes to start, so /proc is as full as a shared host's")
    ap.add_argument("--threads", type=int, default=0, help="use a stand-in candidate with this many working threads")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    idle = [subprocess.Popen(["sleep", "3600"]) for _ in range(args.busy)]
    candidate_link.process_tree = counted_tree  # the link's scans, counted
    link = None if args.threads else CandidateLink("cpu", dict(os.environ))
    proc = stand_in(args.threads) if link is None else link.proc
    root = proc.pid
    try:
        time.sleep(1 if args.threads else 8)  # a real one imports torch and waits for its request, as a spare does
        now = FrozenTree(root)
        now.freeze()
        sides = {"before": Before(root), "now": now}
        threads = sum(len(os.listdir(f"/proc/{pid}/task")) for pid in sandbox.process_tree(root))
        entries = len(os.listdir("/proc"))
        rows: dict[str, list[tuple[float, float, int]]] = {k: [] for k in sides}
        for r in range(args.rounds):
            for name in (("before", "now") if r % 2 else ("now", "before")):
                rows[name].append(one_round(sides[name]))
    finally:
        if link is None:
            proc.kill()
            proc.wait()
        else:
            link.close()
        for p in idle:
            p.kill()
            p.wait()
    out: dict[str, Any] = {"rounds": args.rounds, "busy": args.busy, "stand_in_threads": args.threads,
                           "proc_entries": entries, "candidate_threads": threads}
    for name, got in rows.items():
        out[name] = {"wall_ms_median": statistics.median(g[0] for g in got),
                     "cpu_ms_median": statistics.median(g[1] for g in got),
                     "scans_per_round": statistics.mean(g[2] for g in got)}
    out["ratio_wall"] = out["before"]["wall_ms_median"] / out["now"]["wall_ms_median"]
    out["ratio_cpu"] = out["before"]["cpu_ms_median"] / max(out["now"]["cpu_ms_median"], 1e-9)
    print(json.dumps(out, indent=2))
    if args.out:
        args.out.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
