"""The device-slot scheduler (`cuda_agent.backends.slots`): jobs land in their slot's environment,
a slot is set up once, a dead slot is restarted and its job retried once then reported, results
arrive as each completes, and neither a killed driver nor a failing callback leaves a process."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cuda_agent.backends.devices import SlotSpec, spread
from cuda_agent.backends.slots import LocalSlots, Outcome, RaySlots, stateless

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def importable_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    """Slot processes unpickle this module's work functions."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.chdir(REPO)


def where(job: str) -> dict[str, object]:
    if job.startswith("sleep"):
        time.sleep(float(job.split(":")[1].split("-")[0]))
    if job.startswith("die-once:") and not Path(job.split(":", 1)[1]).exists():
        Path(job.split(":", 1)[1]).write_text("died")
        os._exit(3)
    if job == "die":
        os._exit(3)
    if job == "raise":
        raise ValueError("the job's own failure")
    if job == "unpicklable":
        return lambda: None  # a result the slot cannot send back
    return {"job": job, "pid": os.getpid(), "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "mark": os.environ.get("SLOT_MARK")}


class Counted:
    """Per-slot state: built once per slot process."""

    def __init__(self) -> None:
        self.pid, self.calls = os.getpid(), 0

    def __call__(self, job: str) -> tuple[int, int]:
        self.calls += 1
        return self.pid, self.calls


def collect(slots: LocalSlots, jobs: list[str], factory=stateless(where)) -> list[tuple[str, Outcome]]:  # type: ignore[no-untyped-def]
    got: list[tuple[str, Outcome]] = []
    slots.run(jobs, factory, lambda job, out: got.append((job, out)))
    return got


def test_jobs_run_in_their_slots_environment(tmp_path: Path) -> None:
    specs = [SlotSpec("cuda:5", {"CUDA_VISIBLE_DEVICES": "5", "SLOT_MARK": "a"}),
             SlotSpec("cuda:7", {"CUDA_VISIBLE_DEVICES": "7", "SLOT_MARK": "b"})]
    got = collect(LocalSlots(specs, tmp_path), [f"sleep:0.3-{i}" for i in range(6)])
    assert sorted(j for j, _ in got) == sorted(f"sleep:0.3-{i}" for i in range(6))
    for _, out in got:
        assert out.error is None and out.attempts == 1
        assert out.slot == f"cuda:{out.value['cuda']}"
        assert out.value["mark"] == {"cuda:5": "a", "cuda:7": "b"}[out.slot]
    assert {out.slot for _, out in got} == {"cuda:5", "cuda:7"}  # both slots took work
    assert len({out.value["pid"] for _, out in got}) == 2  # one long-lived process per slot


def test_a_slot_is_set_up_once_and_runs_one_job_at_a_time(tmp_path: Path) -> None:
    got = collect(LocalSlots([SlotSpec("cpu:0")], tmp_path), ["a", "b", "c"], factory=Counted)
    assert [out.value[1] for _, out in got] == [1, 2, 3]
    assert len({out.value[0] for _, out in got}) == 1


def test_a_dead_slot_is_restarted_and_its_job_retried_once_then_reported(tmp_path: Path) -> None:
    marker = tmp_path / "died-once"
    got = dict(collect(LocalSlots([SlotSpec("cpu:0")], tmp_path / "logs"), [f"die-once:{marker}", "die", "ok", "raise", "unpicklable"]))
    once = got[f"die-once:{marker}"]
    assert once.error is None and once.attempts == 2 and once.value["job"] == f"die-once:{marker}"
    twice = got["die"]
    assert twice.value is None and twice.attempts == 2 and twice.slot == "cpu:0"
    assert "slot cpu:0 died twice" in twice.error and str(tmp_path / "logs" / "slot-cpu0.log") in twice.error
    assert got["ok"].value["job"] == "ok"  # the restarted slot goes on with the next job
    assert got["raise"].value is None and "ValueError: the job's own failure" in got["raise"].error  # data, not raised
    assert got["raise"].attempts == 1
    assert got["unpicklable"].attempts == 1 and "pickle" in got["unpicklable"].error.lower()  # the job's, not a dead slot


def broken_factory():  # type: ignore[no-untyped-def]
    raise RuntimeError("the model cannot load")


def test_a_slot_whose_factory_fails_is_not_restarted_for_every_job(tmp_path: Path) -> None:
    got = dict(collect(LocalSlots([SlotSpec("cpu:0")], tmp_path / "logs"), ["a", "b", "c"], broken_factory))
    assert all(o.value is None and "could not start its work" in o.error for o in got.values()), got
    assert "the model cannot load" in got["a"].error  # its log says why
    assert (tmp_path / "logs" / "slot-cpu0.log").read_text().count("RuntimeError: the model cannot load") == 1  # once


def test_results_arrive_as_each_job_completes(tmp_path: Path) -> None:
    order: list[tuple[str, float]] = []
    t0 = time.monotonic()
    LocalSlots(spread([SlotSpec("cpu:0")], 2), tmp_path).run(
        ["sleep:4", "sleep:0.1"], stateless(where), lambda job, out: order.append((job, time.monotonic() - t0)))
    assert [j for j, _ in order] == ["sleep:0.1", "sleep:4"]
    assert order[1][1] - order[0][1] > 2  # the quick one was reported while the slow one still ran


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def _pids(results: list[tuple[str, Outcome]]) -> set[int]:
    return {out.value["pid"] for _, out in results if out.value}


def test_a_failing_callback_stops_every_slot(tmp_path: Path) -> None:
    seen: list[tuple[str, Outcome]] = []

    def on_result(job: str, out: Outcome) -> None:
        seen.append((job, out))
        raise KeyboardInterrupt  # as Ctrl-C would, while the other slot is mid-job

    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        LocalSlots([SlotSpec("cpu:0"), SlotSpec("cpu:1")], tmp_path).run(["ok", "sleep:60", "ok"], stateless(where),
                                                                           on_result)
    assert time.monotonic() - t0 < 30  # the 60 s job was not waited for
    assert len(seen) == 1 and not [p for p in _pids(seen) if _alive(p)]


DRIVER = r'''
import json, sys
from cuda_agent.backends.devices import SlotSpec
from cuda_agent.backends.slots import LocalSlots, stateless
from tests.backends.test_slots import where

def show(job, out):
    print(json.dumps(out.value["pid"]), flush=True)

LocalSlots([SlotSpec("cpu:0"), SlotSpec("cpu:1")], sys.argv[1]).run(
    ["ok", "ok", "sleep:300", "sleep:300"], stateless(where), show)
'''


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG")
def test_a_killed_driver_leaves_no_slot_process(tmp_path: Path) -> None:
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                              cwd=REPO, env=os.environ)
    assert driver.stdout is not None
    pids = {json.loads(driver.stdout.readline()) for _ in range(2)}
    assert pids and all(_alive(p) for p in pids)
    time.sleep(0.5)  # both slots are now in their 300 s jobs
    os.kill(driver.pid, signal.SIGKILL)
    driver.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and [p for p in pids if _alive(p)]:
        time.sleep(0.1)
    assert not [p for p in pids if _alive(p)], "a slot process outlived the killed driver"


@pytest.mark.slow
def test_ray_slots_keep_the_same_contract() -> None:
    ray = pytest.importorskip("ray")
    slots = RaySlots("cpu", num_cpus=2, max_retries=0)
    assert slots.slot_options() == {"num_cpus": 1, "max_retries": 0}
    assert RaySlots("cuda").slot_options()["num_gpus"] == 1
    got: dict[str, Outcome] = {}
    try:
        slots.run(["a", "raise", "die"], stateless(where), lambda job, out: got.__setitem__(job, out))
        assert slots.on_cpu(where, "b").result()["job"] == "b"
    finally:
        ray.shutdown()
    assert re.fullmatch(r"ray:[0-9a-f]{8}:cpu", got["a"].slot) and got["a"].value["job"] == "a"
    assert "ValueError: the job's own failure" in got["raise"].error
    assert got["die"].value is None and got["die"].slot == "ray" and "ray task failed" in got["die"].error
