"""Load and fault test of `cuda-agent serve` on the CPU backend (issue 27), sized for a 2-core box.

    PYTHONPATH=src nice -n 10 python bench/serve_load.py --out bench/results/serve_load_<date>

Phase 1, load: a real `cuda-agent serve --backend cpu --slots 2 --max-queue 16` subprocess gets
1,000 requests from 32 concurrent clients, shuffled with a fixed seed:
  - 48 distinct real evaluations: honest, wrong, hanging (each under its own `timeout_s`) and
    crashing (SIGSEGV, SIGABRT) candidates of the bundled `swish` example and a small ReLU task;
  - every other evaluation request is a repeat of one of them (answered from the store, or
    joined to the same id while it is still running);
  - malformed, unauthenticated and oversized requests, each with the 4xx and message it must get.
Every request's answer is checked (right status, right verdict, one id per distinct candidate),
the store is checked (one row per distinct candidate, each run once; the one whose slot was killed
ran twice on purpose, see below), the RSS of the service and of its whole process tree is sampled
every 0.5 s, and latency p50 / p99 and throughput are recorded.
While the load runs, one busy slot process is killed with SIGKILL mid-evaluation: its job must be
answered (run once more on the replacement slot) and none of its processes may be left behind.

Phase 2, crash: a batch of 6 new evaluations is submitted, the whole service is killed with
SIGKILL while 2 of them run, no process of its tree may survive; it is restarted on the same
store: all 48 earlier verdicts are still there, the 2 running ones are failed as interrupted (not
re-run unasked), the 4 queued ones run once; submitted again, the 2 interrupted ones run.

Writes results.json, results.md, memory.csv and the service logs under --out; exits non-zero if
any check fails."""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import signal
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from cuda_agent.examples import get_example  # noqa: E402
from cuda_agent.serve.client import ServiceClient  # noqa: E402
from cuda_agent.serve.models import Evaluation  # noqa: E402
from tests.conftest import RELU_BINDING, RELU_KERNEL, RELU_MODEL_NEW, RELU_TASK  # noqa: E402
from tests.evaluation.test_evaluate_cpu import HANG_KERNEL, SEGFAULT_KERNEL  # noqa: E402
from tests.serve.test_serve import TOKEN, Server, _alive, _cmdline, subtree  # noqa: E402

CHEAP = {"measure": False, "trials": 1, "compile_baseline": False}
ABORT_KERNEL = '''
#include <cstdint>
#include <cstdlib>
extern "C" void relu_kernel(const float* x, float* y, int64_t n) { std::abort(); }
'''
MAX_FILE = 16384
MAX_BODY = 65536


# --- the requests ---------------------------------------------------------------------------
@dataclass
class Candidate:
    """One distinct evaluation and the verdict it must get."""

    label: str
    kind: str  # honest | wrong | hang | segv | abort
    task: dict[str, str]
    files: dict[str, str]
    options: dict[str, Any]

    def check(self, row: Evaluation) -> str | None:
        """Why this answer is wrong (None when right)."""
        if row.status != "done" or row.result is None:
            return f"{self.label}: status {row.status}, error {row.error!r}"
        r = row.result
        want = {"honest": lambda: r.reward == 1 and r.correct,
                "wrong": lambda: r.reward == -1 and r.compiled and r.reason.startswith("incorrect"),
                "hang": lambda: r.reward == -1 and "timed out" in r.reason,
                "segv": lambda: r.reward == -1 and "SIGSEGV" in r.reason,
                "abort": lambda: r.reward == -1 and "SIGABRT" in r.reason}[self.kind]
        return None if want() else f"{self.label} ({self.kind}): reward {r.reward}, reason {r.reason[:200]!r}"


def candidates(tag: str) -> list[Candidate]:
    """48 distinct candidates, each made distinct by a comment (so each is a new build and a new row)."""
    swish = get_example("swish").solution_dir("cpu")
    sw = {"model_new.py": (swish / "model_new.py").read_text(),
          "kernels/swish.cpp": (swish / "kernels/swish.cpp").read_text(),
          "kernels/swish_binding.cpp": (swish / "kernels/swish_binding.cpp").read_text()}
    sw_wrong = sw["kernels/swish.cpp"].replace("std::exp(-v)", "std::exp(v)")
    assert sw_wrong != sw["kernels/swish.cpp"]
    relu_wrong = RELU_KERNEL.replace("x[i] > 0.f ? x[i] : 0.f", "x[i]")
    relu = {"source": RELU_TASK}

    def relu_files(kernel: str, i: int, kind: str) -> dict[str, str]:
        return {"model_new.py": RELU_MODEL_NEW, "kernels/relu.cpp": kernel + f"\n// {kind} {i} {tag}\n",
                "kernels/relu_binding.cpp": RELU_BINDING}

    def swish_files(kernel: str, i: int, kind: str) -> dict[str, str]:
        return {**sw, "kernels/swish.cpp": kernel + f"\n// {kind} {i} {tag}\n"}

    out = []
    for kind, n_relu, n_swish, kernel_relu, kernel_swish, opts in (
            ("honest", 10, 10, RELU_KERNEL, sw["kernels/swish.cpp"], CHEAP),
            ("wrong", 6, 6, relu_wrong, sw_wrong, CHEAP),
            ("hang", 6, 0, HANG_KERNEL, None, {**CHEAP, "timeout_s": 8}),
            ("segv", 5, 0, SEGFAULT_KERNEL, None, CHEAP),
            ("abort", 5, 0, ABORT_KERNEL, None, CHEAP)):
        out += [Candidate(f"relu-{kind}-{i}", kind, relu, relu_files(kernel_relu, i, kind), opts) for i in range(n_relu)]
        out += [Candidate(f"swish-{kind}-{i}", kind, {"name": "swish"}, swish_files(kernel_swish, i, kind), opts)
                for i in range(n_swish)]
    return out


@dataclass
class Rejection:
    """A request the service must refuse: its method, path, body, token, and the answer it must get."""

    label: str
    status: int
    detail: str  # a substring of the answer's detail
    body: bytes | None
    method: str = "POST"
    path: str = "/v1/evaluations"
    token: str | None = TOKEN


def rejections(good: Candidate) -> list[Rejection]:
    def body(**over: Any) -> bytes:
        req = {"task": good.task, "files": good.files, "options": good.options, **over}
        return json.dumps(req).encode()

    many = {"model_new.py": RELU_MODEL_NEW, **{f"kernels/k{i}.cpp": "" for i in range(65)}}
    return [
        Rejection("malformed json", 422, "JSON decode error", b'{"task": {"name": "swish"}, "files": {'),
        Rejection("json array", 422, "", b"[]"),
        Rejection("json null", 422, "", b"null"),
        Rejection("not utf-8", 422, "", b"\xff\xfe{\x00"),
        Rejection("files not an object", 422, "", body(files=["model_new.py"])),
        Rejection("unknown task", 422, "unknown task 'no_such_task'", body(task={"name": "no_such_task"})),
        Rejection("task neither name nor source", 422, "", body(task={})),
        Rejection("missing model_new.py", 422, "missing file: model_new.py",
                  body(files={k: v for k, v in good.files.items() if k != "model_new.py"})),
        Rejection("path outside kernels/", 422, "not a candidate path", body(files={**good.files, "../evil.py": "x"})),
        Rejection("task source without Model", 422, "missing top-level", body(task={"source": "x = 1"})),
        Rejection("option out of range", 422, "", body(options={"trials": 0})),
        Rejection("unknown option", 422, "", body(options={"backend": "cuda"})),
        Rejection("batch with one bad item", 422, "unknown task",
                  json.dumps({"items": [json.loads(body()), json.loads(body(task={"name": "nope"}))]}).encode(),
                  path="/v1/evaluations/batch"),
        Rejection("no token", 401, "bearer token", body(), token=None),
        Rejection("wrong token", 401, "bearer token", body(), token="not-the-token"),
        Rejection("file over --max-file-bytes", 413, "kernels/big.cpp",
                  body(files={**good.files, "kernels/big.cpp": "/" * (MAX_FILE + 1)})),
        Rejection("task source over --max-file-bytes", 413, "task source",
                  body(task={"source": RELU_TASK + "#" * MAX_FILE})),
        Rejection("body over --max-body-bytes", 413, "over the limit",
                  body(files={**good.files, "kernels/huge.cpp": "/" * MAX_BODY})),
        Rejection("too many files", 413, "too many files", body(files=many)),
        Rejection("unknown id", 404, "no evaluation", None, "GET", "/v1/evaluations/" + "0" * 64),
    ]


# --- one client request ---------------------------------------------------------------------
@dataclass
class Record:
    label: str
    kind: str
    latency_s: float = 0.0
    status: int = 0
    retries_429: int = 0
    eval_id: str | None = None
    cached: bool | None = None
    runs: int | None = None
    problem: str | None = None
    answers: int = 0


def http(url: str, method: str, body: bytes | None, token: str | None, timeout_s: float = 300
         ) -> tuple[int, Any, dict[str, str]]:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as r:
            return r.status, json.loads(r.read()), dict(r.headers)
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        try:
            data = json.loads(raw)
        except ValueError:
            data = raw.decode(errors="replace")
        return exc.code, data, {k.lower(): v for k, v in exc.headers.items()}


def run_candidate(url: str, c: Candidate) -> Record:
    rec = Record(c.label, "evaluation")
    body = json.dumps({"task": c.task, "files": c.files, "options": c.options}).encode()
    t0 = time.monotonic()
    while True:
        status, data, headers = http(url + "/v1/evaluations?wait=60", "POST", body, TOKEN, 400)
        if status != 429:
            break
        rec.retries_429 += 1
        time.sleep(min(15.0, float(headers.get("retry-after", 1))))
    rec.status = status
    if status not in (200, 202):
        rec.problem = f"{c.label}: submit answered {status} {data}"
        rec.latency_s = time.monotonic() - t0
        return rec
    row = Evaluation.model_validate(data)
    rec.cached = row.cached
    while row.status not in ("done", "failed"):
        status, data, _ = http(url + f"/v1/evaluations/{row.id}?wait=60", "GET", None, TOKEN, 400)
        if status != 200:
            rec.problem = f"{c.label}: poll answered {status} {data}"
            break
        row = Evaluation.model_validate(data)
    rec.latency_s = time.monotonic() - t0
    rec.answers, rec.eval_id, rec.runs = 1, row.id, row.runs
    rec.problem = rec.problem or c.check(row)
    return rec


def run_rejection(url: str, r: Rejection) -> Record:
    rec = Record(r.label, "rejection")
    t0 = time.monotonic()
    status, data, _ = http(url + r.path, r.method, r.body, r.token, 60)
    rec.latency_s, rec.status, rec.answers = time.monotonic() - t0, status, 1
    detail = json.dumps(data.get("detail") if isinstance(data, dict) else data)
    if status != r.status or r.detail not in detail:
        rec.problem = f"{r.label}: want {r.status} with {r.detail!r}, got {status} {detail[:300]}"
    return rec


# --- processes and memory -------------------------------------------------------------------
def rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class Sampler(threading.Thread):
    """RSS of the service process and of its whole tree (slots, judges, candidates) every `every` s."""

    def __init__(self, srv: Server, every: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.srv, self.every, self.rows, self.stop = srv, every, [], threading.Event()
        self.t0 = time.monotonic()

    def run(self) -> None:
        while not self.stop.is_set():
            tree = self.srv.descendants()
            self.rows.append((round(time.monotonic() - self.t0, 2), rss_kb(self.srv.proc.pid),
                              rss_kb(self.srv.proc.pid) + sum(rss_kb(p) for p in tree), len(tree)))
            self.stop.wait(self.every)


def ps_tree(pids: set[int]) -> list[str]:
    """`ps`-like lines (pid, ppid, state, command) of those of `pids` still alive."""
    out = []
    for pid in sorted(_alive(pids)):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        cmd = _cmdline(pid).replace(b"\0", b" ").decode(errors="replace")[:160]
        out.append(f"{pid} ppid={stat[1]} state={stat[0]} {cmd}")
    return out


def wait_gone(pids: set[int], timeout_s: float) -> list[str]:
    deadline = time.monotonic() + timeout_s
    while _alive(pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    return ps_tree(pids)


def kill_busy_slot(srv: Server, store: Path, when: Callable[[], bool], report: dict[str, Any]) -> None:
    """When `when()` turns true: SIGKILL a slot that is running a candidate; its processes must go."""
    while not when():
        time.sleep(0.5)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for slot in srv.slot_pids():
            below = subtree(slot)
            if any(b"cuda_agent" in _cmdline(p) for p in below):  # its judge and candidate are up
                running = _running_ids(store)
                os.kill(slot, signal.SIGKILL)
                report.update(killed_slot=slot, its_processes=sorted(below), running_then=running)
                report["left_behind"] = wait_gone(below | {slot}, 20)
                return
        time.sleep(0.2)
    report["error"] = "no busy slot found within 120 s"


def _running_ids(store: Path) -> list[str]:
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        return [r[0] for r in db.execute("SELECT id FROM evaluations WHERE status='running'")]


def store_rows(store: Path) -> dict[str, tuple[str, int]]:
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        return {r[0]: (r[1], r[2]) for r in db.execute("SELECT id, status, runs FROM evaluations")}


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    v = sorted(values)
    return round(v[min(len(v) - 1, int(q * len(v)))], 3)


# --- the phases -----------------------------------------------------------------------------
def load_phase(args: argparse.Namespace, srv: Server, store: Path, cands: list[Candidate],
               report: dict[str, Any]) -> list[Record]:
    rng = random.Random(args.seed)
    rejects = rejections(cands[0])
    n_reject = args.rejections
    n_repeat = args.requests - len(cands) - n_reject
    plan: list[tuple[str, Any]] = [("c", c) for c in cands]
    plan += [("c", rng.choice(cands)) for _ in range(n_repeat)]
    plan += [("r", rejects[i % len(rejects)]) for i in range(n_reject)]
    rng.shuffle(plan)
    done = Counter()  # type: ignore[var-annotated]
    lock = threading.Lock()

    def one(item: tuple[str, Any]) -> Record:
        kind, what = item
        try:
            rec = run_candidate(srv.url, what) if kind == "c" else run_rejection(srv.url, what)
        except Exception as exc:  # noqa: BLE001 - a transport failure is a failed check, recorded
            rec = Record(what.label, "evaluation" if kind == "c" else "rejection", problem=f"{what.label}: {exc!r}")
        with lock:
            done["n"] += 1
        return rec

    kill: dict[str, Any] = {}
    killer = threading.Thread(target=kill_busy_slot, args=(srv, store, lambda: done["n"] >= args.requests // 5, kill),
                              daemon=True)
    killer.start()
    t0 = time.monotonic()
    with ThreadPoolExecutor(args.clients) as pool:
        records = list(pool.map(one, plan))
    wall = time.monotonic() - t0
    killer.join(130)
    report["load"] = {"requests": len(plan), "clients": args.clients, "distinct_evaluations": len(cands),
                      "repeats": n_repeat, "rejections": n_reject, "wall_s": round(wall, 1),
                      "throughput_req_per_s": round(len(plan) / wall, 2),
                      "evaluations_per_s": round(len(cands) / wall, 3)}
    report["slot_kill"] = kill
    return records


def crash_phase(args: argparse.Namespace, srv: Server, db: Path, cache: Path, tag: str,
                before: dict[str, tuple[str, int]], report: dict[str, Any]) -> tuple[Server, list[str]]:
    problems: list[str] = []
    batch = [Candidate(f"batch-{i}", "honest", {"source": RELU_TASK},
                       {"model_new.py": RELU_MODEL_NEW, "kernels/relu.cpp": RELU_KERNEL + f"\n// batch {i} {tag}\n",
                        "kernels/relu_binding.cpp": RELU_BINDING}, CHEAP) for i in range(6)]
    rows = srv.client.submit_batch([(c.task, c.files, c.options) for c in batch])
    ids = [r.id for r in rows]
    deadline = time.monotonic() + 120
    while sum(srv.client.get(i).status == "running" for i in ids) < 2:
        if time.monotonic() > deadline:
            problems.append("crash phase: 2 batch rows never ran at once")
            break
        time.sleep(0.1)
    tree = srv.descendants()
    states = {i[:12]: srv.client.get(i).status for i in ids}
    srv.kill9()
    left = wait_gone(tree, 30)
    if left:
        problems.append(f"crash phase: processes left behind after kill -9 of the service: {left}")
    srv.stop()
    after_kill = store_rows(db)
    srv = Server(db, cache, *args.server_args)
    c = srv.client
    lost = [k for k, (s, _) in before.items() if (c.get(k).status, c.get(k).runs) != before[k]]
    if lost:
        problems.append(f"crash phase: {len(lost)} earlier verdicts changed or lost after the restart")
    interrupted = [i for i in ids if after_kill[i][0] == "running"]
    finals = {i: c.wait(i, 300) for i in ids}
    for i in ids:
        row = finals[i]
        if i in interrupted:
            if not (row.status == "failed" and row.error and row.error.startswith("interrupted") and row.runs == 1):
                problems.append(f"crash phase: running row {i[:12]} not failed as interrupted: {row.status} {row.runs}")
        elif not (row.status == "done" and row.runs == 1 and row.result and row.result.reward == 1):
            problems.append(f"crash phase: queued row {i[:12]} not run exactly once: {row.status} runs={row.runs}")
    again = c.submit_batch([(b.task, b.files, b.options) for b, i in zip(batch, ids) if i in interrupted])
    rerun = {r.id: c.wait(r.id, 300) for r in again}
    for i, row in rerun.items():
        if not (row.status == "done" and row.result and row.result.reward == 1 and row.runs == 2):
            problems.append(f"crash phase: interrupted row {i[:12]} submitted again did not run once more: "
                            f"{row.status} runs={row.runs}")
    rows_now = store_rows(db)
    if set(rows_now) != set(before) | set(ids):
        problems.append(f"crash phase: store holds {len(rows_now)} rows, want {len(set(before) | set(ids))}")
    report["service_kill"] = {"batch": 6, "states_at_kill": states, "tree_at_kill": len(tree),
                              "left_behind": left, "interrupted": len(interrupted),
                              "queued_then_run_once": sum(1 for i in ids if i not in interrupted
                                                          and finals[i].status == "done" and finals[i].runs == 1),
                              "earlier_verdicts_kept": len(before) - len(lost), "store_rows": len(rows_now),
                              "interrupted_resubmitted_done": sum(r.status == "done" for r in rerun.values())}
    return srv, problems


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--rejections", type=int, default=150)
    ap.add_argument("--slots", type=int, default=2)
    ap.add_argument("--seed", type=int, default=27)
    ap.add_argument("--max-growth-mb", type=float, default=40.0, help="fail if the service's RSS grows more")
    ap.add_argument("--quick", action="store_true", help="every 6th distinct candidate only (a smoke run)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    args.server_args = ["--slots", str(args.slots), "--max-queue", "16", "--max-file-bytes", str(MAX_FILE),
                        "--max-body-bytes", str(MAX_BODY)]
    args.out.mkdir(parents=True, exist_ok=True)
    cache = Path(os.environ.get("CUDA_AGENT_CACHE", "/tmp/cuda-agent-serve-load-cache"))
    os.environ["CUDA_AGENT_CACHE"] = str(cache)
    tag = str(time.time())
    db = Path(tempfile.mkdtemp(prefix="serve-load-")) / "serve.sqlite"  # the store and slot logs: not results
    cands = candidates(tag)[:: 6 if args.quick else 1]
    report: dict[str, Any] = {"command": " ".join(["python", *sys.argv]), "machine":
                              f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start",
                              "server": ["cuda-agent", "serve", "--backend", "cpu", *args.server_args,
                                         "--memory-limit-gb", "3"]}
    problems: list[str] = []

    srv = Server(db, cache, *args.server_args)
    try:
        # warm: the PCH and both slots' judges (not counted)
        warm = [Candidate(f"warm-{i}", "honest", {"source": RELU_TASK},
                          {"model_new.py": RELU_MODEL_NEW, "kernels/relu.cpp": RELU_KERNEL + f"\n// warm {i} {tag}\n",
                           "kernels/relu_binding.cpp": RELU_BINDING}, CHEAP) for i in range(args.slots)]
        with ThreadPoolExecutor(args.slots) as pool:
            for rec in pool.map(lambda c: run_candidate(srv.url, c), warm):
                assert rec.problem is None, rec.problem
        sampler = Sampler(srv)
        sampler.start()
        records = load_phase(args, srv, db, cands, report)
        sampler.stop.set()
        sampler.join()

        # every request answered once, right
        problems += [r.problem for r in records if r.problem]
        problems += [f"{r.label}: answered {r.answers} times" for r in records if r.answers != 1]
        ids = defaultdict(set)
        for r in records:
            if r.kind == "evaluation":
                ids[r.label].add(r.eval_id)
        problems += [f"{lab}: several ids {v}" for lab, v in ids.items() if len(v) != 1]
        if len({next(iter(v)) for v in ids.values()}) != len(cands):
            problems.append("two distinct candidates share an id")
        rows = store_rows(db)
        load_ids = {next(iter(v)) for v in ids.values()}
        killed_job = set(report["slot_kill"].get("running_then", []))
        for key in load_ids:
            status, runs = rows.get(key, ("missing", 0))
            want = {1, 2} if key in killed_job else {1}
            if status != "done" or runs not in want:
                problems.append(f"store row {key[:12]}: {status}, runs {runs}")
        reran = [k for k in load_ids if rows[k][1] == 2]
        if len(reran) != 1 or not set(reran) <= killed_job:
            problems.append(f"want exactly one job run twice (the killed slot's), got {len(reran)}")
        if report["slot_kill"].get("left_behind") or "error" in report["slot_kill"]:
            problems.append(f"slot kill: {report['slot_kill']}")
        report["slot_kill"]["job_run_twice"] = [k[:12] for k in reran]
        report["store_after_load"] = {"rows": len(rows), "done": sum(s == "done" for s, _ in rows.values()),
                                      "warm_up_rows": len(warm), "runs_total": sum(n for _, n in rows.values())}
        ev = [r for r in records if r.kind == "evaluation"]
        first = [r for r in ev if not r.cached]
        repeat = [r for r in ev if r.cached]
        rej = [r for r in records if r.kind == "rejection"]
        report["verdicts"] = dict(Counter(c.kind for c in cands))
        report["answers"] = {"evaluation_requests": len(ev), "first_submissions": len(first),
                             "answered_from_store_or_joined": len(repeat), "rejected": len(rej),
                             "rejected_by_status": dict(Counter(str(r.status) for r in rej)),
                             "any_5xx": sum(r.status >= 500 for r in records),
                             "submissions_that_met_429": sum(r.retries_429 > 0 for r in records),
                             "429_retries": sum(r.retries_429 for r in records)}
        lat = {"all": [r.latency_s for r in records], "first_submission": [r.latency_s for r in first],
               "repeat": [r.latency_s for r in repeat], "rejected": [r.latency_s for r in rej]}
        report["latency_s"] = {k: {"n": len(v), "p50": pct(v, 0.5), "p99": pct(v, 0.99), "max": pct(v, 1.0)}
                               for k, v in lat.items()}
        report["health"] = srv.client.health()
        report["devices"] = srv.client.request("GET", "/v1/devices")

        # memory
        with (args.out / "memory.csv").open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["t_s", "service_rss_kb", "tree_rss_kb", "tree_processes"])
            w.writerows(sampler.rows)
        svc = [r[1] for r in sampler.rows]
        tree = [r[2] for r in sampler.rows]
        k = max(1, len(svc) // 5)
        mem = {"samples": len(svc), "service_rss_mb_first_fifth_median": round(statistics.median(svc[:k]) / 1024, 1),
               "service_rss_mb_last_fifth_median": round(statistics.median(svc[-k:]) / 1024, 1),
               "service_rss_mb_max": round(max(svc) / 1024, 1),
               "tree_rss_mb_first_fifth_median": round(statistics.median(tree[:k]) / 1024, 1),
               "tree_rss_mb_last_fifth_median": round(statistics.median(tree[-k:]) / 1024, 1),
               "tree_rss_mb_max": round(max(tree) / 1024, 1)}
        growth = mem["service_rss_mb_last_fifth_median"] - mem["service_rss_mb_first_fifth_median"]
        mem["service_growth_mb"] = round(growth, 1)
        report["memory"] = mem
        if growth > args.max_growth_mb:
            problems.append(f"service RSS grew {growth:.1f} MB over the load")

        srv, crash_problems = crash_phase(args, srv, db, cache, tag, {k: rows[k] for k in rows}, report)
        problems += crash_problems
    finally:
        tree_end = srv.descendants() | {srv.proc.pid}
        srv.stop()
        left = wait_gone(tree_end, 30)
        report["stopped_cleanly"] = {"left_behind": left}
        if left:
            problems.append(f"processes left after a normal stop: {left}")
        for log in db.parent.glob("*.log"):
            log.rename(args.out / f"service-{log.name.split('.')[-2]}.log")
        report["problems"] = problems
        report["ok"] = not problems
        report["machine"] += f", {os.getloadavg()[0]:.1f} at end"
        (args.out / "results.json").write_text(json.dumps(report, indent=1) + "\n")
        (args.out / "results.md").write_text(markdown(report))
    print(json.dumps({k: report.get(k) for k in ("load", "latency_s", "memory", "answers", "ok", "problems")},
                     indent=1))
    sys.exit(0 if not problems else 1)


def markdown(r: dict[str, Any]) -> str:
    L = r.get("load", {})
    lines = [f"# `cuda-agent serve` load and faults, CPU backend ({r['machine']})", "",
             f"Command: `{r['command']}`  ", f"Server: `{' '.join(r['server'])}`", "",
             f"**{'all checks passed' if r.get('ok') else 'FAILED: ' + '; '.join(r.get('problems', []))[:2000]}**", "",
             "| | |", "|---|---|"]
    for k, v in L.items():
        lines.append(f"| {k} | {v} |")
    for k, v in r.get("answers", {}).items():
        lines.append(f"| {k} | {v} |")
    lines.append(f"| distinct candidates by kind | {r.get('verdicts')} |")
    lines += ["", "| latency (s) | n | p50 | p99 | max |", "|---|---|---|---|---|"]
    for k, v in r.get("latency_s", {}).items():
        lines.append(f"| {k} | {v['n']} | {v['p50']} | {v['p99']} | {v['max']} |")
    lines += ["", "Memory (RSS, MB; `memory.csv` has the series):", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in r.get("memory", {}).items()]
    lines += ["", f"Slot killed (SIGKILL) mid-evaluation: `{json.dumps(r.get('slot_kill'))}`", "",
              f"Service killed (SIGKILL) mid-batch, restarted: `{json.dumps(r.get('service_kill'))}`", "",
              f"Normal stop: `{json.dumps(r.get('stopped_cleanly'))}`", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
