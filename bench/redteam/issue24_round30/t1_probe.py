"""t1: can a worker that sleeps through the judge's look and then enters one long page-cache preadv hide its CPU in
the stop leaders' allowance (STOP_LEADERS busiest threads: CPU_LEADER_NS + CPU_LEADER_PER_THREAD_NS x threads)?
Drives `FrozenTree` directly (the judge's own class: mark_done at "done", then freeze), on t1_timed_worker.c.
Alternates HEAD's constants with the old ones (1,500 ns, 30 us) freeze by freeze.
Usage: python t1_probe.py N BYTES DELAY_US[,DELAY_US...] [REPS]"""
import json
import os
import subprocess
import sys
import time

from cuda_agent.evaluation.candidate_link import FrozenTree

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = "/tmp/rt30_t1"
if not os.path.exists(BIN):
    subprocess.run(["gcc", "-O2", "-pthread", "-o", BIN, os.path.join(HERE, "t1_timed_worker.c")], check=True)
N, BYTES = int(sys.argv[1]), int(sys.argv[2])
DELAYS = [int(d) for d in sys.argv[3].split(",")]
REPS = int(sys.argv[4]) if len(sys.argv) > 4 else 10
SETS = {"head": (3_000, 0.00005), "old": (1_500, 0.00003)}
rec = {}
orig_idle = FrozenTree._each_thread_idle


def idle(self, look, counted):
    ok = orig_idle(self, look, counted)
    ran = []
    for pid, by in (self._stopped or {}).items():
        for tid, c in by.items():
            ran.append(c[0] - look.get(pid, {}).get(tid, c[0]))
    rec["ran_us"] = sorted((r // 1000 for r in ran), reverse=True)[:4]
    for pid, by in (self._stopped or {}).items():  # the worker is the first thread made: tid pid + 1
        c = by.get(str(pid + 1))
        if c is not None and str(pid + 1) in look.get(pid, {}):
            rec["worker_us"] = (c[0] - look[pid][str(pid + 1)]) // 1000
    rec["idle_ok"] = ok
    return ok


FrozenTree._each_thread_idle = idle
orig_sig = FrozenTree._signal


def sig(self, s, pids):
    if s == 19 and "sent" not in rec:
        rec["sent"] = time.perf_counter()
    return orig_sig(self, s, pids)


FrozenTree._signal = sig
out = []
for delay in DELAYS:
    p = subprocess.Popen([BIN, str(N), str(delay), str(BYTES)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         start_new_session=True, bufsize=0)
    assert p.stdout.readline() == b"ready\n"
    tree = FrozenTree(p.pid)
    counts = {k: [0, 0, 0] for k in SETS}  # freezes, at once, at once with the worker's copy after the look
    for i in range(2 * REPS):
        name = "head" if i % 2 == 0 else "old"
        FrozenTree.CPU_LEADER_PER_THREAD_NS, FrozenTree.AT_ONCE_PER_THREAD_S = SETS[name]
        rec.clear()
        p.stdin.write(b"x")
        got = b""
        while not got.endswith(b"done\n"):
            got += p.stdout.read(1)
        tree.mark_done()
        tree.freeze()
        wall_ms = (tree.stopped_at - rec.get("sent", tree.stopped_at)) * 1e3
        tree.thaw()
        while p.stdout.read(1) != b"w":
            pass
        hidden = tree.stopped_at_once and rec.get("worker_us", 0) > 300
        c = counts[name]
        c[0] += 1; c[1] += tree.stopped_at_once; c[2] += hidden
        row = {"N": N, "bytes": BYTES, "delay_us": delay, "consts": name, "at_once": tree.stopped_at_once,
               "idle_ok": rec.get("idle_ok"), "worker_us": rec.get("worker_us"), "ran_top_us": rec.get("ran_us"), "cpu_after_done_us": tree.cpu_after_done_ns // 1000,
               "wall_ms": round(wall_ms, 2), "hidden": hidden}
        out.append(row)
        time.sleep(0.02)
    p.kill(); p.wait(); tree.close()
    print(delay, json.dumps(counts), flush=True)
with open(os.path.join(HERE, "t1_probe.jsonl"), "a") as fh:
    for r in out:
        fh.write(json.dumps(r) + "\n")
