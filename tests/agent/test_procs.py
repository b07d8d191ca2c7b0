"""A killed run leaves no process behind (issue 15): `optimize` (a worker pool, or in-process),
`bench` and `data synth` are started for real, killed with SIGKILL or SIGTERM while their
children work, and every process that outlives them is listed.

How survivors are found: the run is started by a small launcher that makes itself a child
subreaper (PR_SET_CHILD_SUBREAPER), so anything orphaned by the kill is re-parented to the
launcher instead of PID 1, and the launcher's descendants after the kill are exactly the
orphans. Processes of the evaluation environment (`cuda_agent.evaluation.*`: the judge and
candidate workers) are reported apart: making them die with their parent belongs to the
evaluation rewrite, which must guarantee it (PR_SET_PDEATHSIG + process group)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]

LAUNCHER = r'''
import ctypes, json, os, signal, subprocess, sys, time
spec = json.loads(sys.argv[1])
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER

def table():
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = open(f"/proc/{pid}/stat").read()
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        out[int(pid)] = (int(fields[1]), fields[0], cmd)
    return out

def descendants(root):
    t, found, todo = table(), {}, [root]
    while todo:
        p = todo.pop()
        for pid, (ppid, state, cmd) in t.items():
            if ppid == p and pid not in found and state != "Z":
                found[pid] = cmd
                todo.append(pid)
    return found

def reap():
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                return
        except ChildProcessError:
            return

log = open(spec["log"], "w")
run = subprocess.Popen(spec["argv"], stdout=log, stderr=subprocess.STDOUT, cwd=spec["cwd"], env={**os.environ, **spec["env"]})
deadline = time.monotonic() + spec["wait_s"]
seen = {}
while time.monotonic() < deadline and run.poll() is None:
    seen = descendants(run.pid)
    if all(sum(m in c for c in seen.values()) >= n for m, n in spec["markers"].items()):
        break
    time.sleep(0.5)
else:
    print(json.dumps({"error": "the markers never appeared", "rc": run.poll(), "seen": seen}))
    run.kill(); sys.exit(0)
time.sleep(spec.get("settle_s", 0))
seen = descendants(run.pid)
os.kill(run.pid, spec["signal"])
rc = run.wait()
time.sleep(spec["grace_s"])
reap()
left = descendants(os.getpid())
for pid in left:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
time.sleep(0.5)
reap()
print(json.dumps({"rc": rc, "seen": seen, "left": left}))
'''


def kill_run(tmp_path: Path, argv: list[str], markers: dict[str, int], sig: int, *, wait_s: float = 240,
             grace_s: float = 4, settle_s: float = 0, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Start `argv`, wait until its descendants' command lines show each marker (count), send `sig`
    to it, and return {"rc", "seen": processes before, "left": survivors} (survivors are killed)."""
    log = tmp_path / "run.log"
    spec = {"argv": argv, "markers": markers, "signal": int(sig), "wait_s": wait_s, "grace_s": grace_s,
            "settle_s": settle_s, "cwd": str(tmp_path), "log": str(log), "env": env or {}}
    out = subprocess.run([sys.executable, "-c", LAUNCHER, json.dumps(spec)], capture_output=True, text=True,
                         timeout=wait_s + 120)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert "error" not in result, f"{result}\n--- run log ---\n{log.read_text()[-3000:]}"
    result["log"] = log.read_text()
    return result


def ours(left: dict[str, str]) -> dict[str, str]:
    """Survivors that are this layer's to clean up (evaluation processes are reported apart)."""
    return {pid: cmd for pid, cmd in left.items() if "cuda_agent.evaluation" not in cmd}


CLI = [sys.executable, "-m", "cuda_agent"]


def sleeper_script(tmp_path: Path, seconds: int) -> Path:
    script = tmp_path / "script.json"
    # only the two sleeps' own command lines read "sleep <seconds>": the bash line (and its sandbox
    # launcher's) spells it through a variable, so a marker count is a count of sleeps
    tens, unit = divmod(seconds, 10)
    script.write_text(json.dumps([{"content": "", "tool_calls": [{"name": "bash", "arguments": {
        "command": f"s={tens}; sleep ${{s}}{unit} & sleep ${{s}}{unit}", "timeout_s": 900}}]}]))
    return script


def test_sigkill_of_an_optimize_pool_leaves_nothing(tmp_path: Path, cache_dir: Path):
    script = sleeper_script(tmp_path, 313)
    r = kill_run(tmp_path, [*CLI, "optimize", "swish", "--samples", "2", "--workers", "2", "--backend", "cpu",
                            "--script", str(script), "--out", str(tmp_path / "out"), "--no-compile-baseline"],
                 {"sleep 313": 4, "cuda_agent.backends.slots": 2}, signal.SIGKILL)
    assert r["rc"] == -signal.SIGKILL
    assert r["left"] == {}, r["left"]
    # the run's lock died with it: a re-run starts at once and resumes both episodes from their journals
    journals = sorted((tmp_path / "out" / "episodes").glob("*/journal.jsonl"))
    assert len(journals) == 2


def test_sigterm_of_an_in_process_optimize_run_stops_cleanly(tmp_path: Path, cache_dir: Path):
    script = sleeper_script(tmp_path, 317)
    r = kill_run(tmp_path, [*CLI, "optimize", "swish", "--backend", "cpu", "--script", str(script), "--out",
                            str(tmp_path / "out"), "--no-compile-baseline"], {"sleep 317": 2}, signal.SIGTERM)
    assert r["rc"] == 130, r["log"][-2000:]
    assert "terminated" in r["log"] and "re-run the same command" in r["log"]
    assert r["left"] == {}, r["left"]


def test_sigkill_of_a_bench_run_leaves_no_slot_or_agent_process(tmp_path: Path, cache_dir: Path):
    # One script shared by the episodes (the policy is cached per process): a bash call, then "done".
    # softmax's episode finishes (its evaluation starts the slot); swish's sleeps in the agent's bash.
    # The sleep's own command line is "sleep 331"; the bash line around it does not contain that text.
    script = tmp_path / "script.json"
    step = {"content": "", "tool_calls": [{"name": "bash", "arguments": {
        "command": "if grep -q sigmoid model.py; then s=33; sleep ${s}1; fi", "timeout_s": 900}}]}
    script.write_text(json.dumps([step, {"content": "done"}] * 4))
    r = kill_run(tmp_path, [*CLI, "bench", "run", "examples", "--only", "softmax", "--only", "swish",
                            "--out", str(tmp_path / "bench"), "--policy", f"agent:scripted:{script}",
                            "--backend", "cpu", "--no-compile-baseline",
                            "--build-workers", "2", "--trials", "1", "--no-timing"],
                 {"sleep 331": 1, "cuda_agent.backends.slots": 1}, signal.SIGKILL, settle_s=1)
    assert r["rc"] == -signal.SIGKILL
    assert ours(r["left"]) == {}, r["left"]


@pytest.mark.slow
def test_sigkill_of_a_data_run_leaves_no_worker(tmp_path: Path, cache_dir: Path):
    r = kill_run(tmp_path, [*CLI, "data", "synth", str(tmp_path / "ops"), "--count", "500", "--workers", "2",
                            "--backend", "cpu", "--no-compile", "--no-report"],
                 {"cuda_agent.data.worker": 2}, signal.SIGKILL, wait_s=400)
    assert r["rc"] == -signal.SIGKILL
    assert ours(r["left"]) == {}, r["left"]
