"""The device lock lets workers share a device but time alone: shared holders run together, a
timer waits for them, and a shared holder that arrives while a timer waits queues behind it."""

from __future__ import annotations

import multiprocessing as mp
import time
from pathlib import Path

from cuda_agent.data import device_lock

CTX = mp.get_context("fork")


def _hold(path: str, mode: str, seconds: float, events: mp.Queue, name: str) -> None:
    lock = device_lock.exclusive(path) if mode == "ex" else device_lock.shared(path)
    with lock:
        events.put((name, "in", time.monotonic()))
        time.sleep(seconds)
        events.put((name, "out", time.monotonic()))


def _run(path: Path, plan: list[tuple[float, str, str, float]]) -> dict[tuple[str, str], float]:
    """Start (delay, name, mode, hold) processes at their delays; return when each got in / out."""
    device_lock.create(path)
    events: mp.Queue = CTX.Queue()
    procs, t0 = [], time.monotonic()
    for delay, name, mode, hold in plan:
        time.sleep(max(0.0, t0 + delay - time.monotonic()))
        p = CTX.Process(target=_hold, args=(str(path), mode, hold, events, name))
        p.start()
        procs.append(p)
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    got = {}
    while len(got) < 2 * len(plan):
        name, what, t = events.get(timeout=5)
        got[(name, what)] = t
    return got


def test_shared_holders_overlap(tmp_path: Path) -> None:
    t = _run(tmp_path / "lock", [(0.0, "a", "sh", 0.8), (0.2, "b", "sh", 0.2)])
    assert t[("b", "in")] < t[("a", "out")]  # b did not wait for a


def test_timer_waits_for_shared_and_later_shared_waits_for_timer(tmp_path: Path) -> None:
    t = _run(tmp_path / "lock", [(0.0, "reader", "sh", 1.0), (0.3, "timer", "ex", 0.6),
                                 (0.6, "late_reader", "sh", 0.1)])
    assert t[("timer", "in")] >= t[("reader", "out")]
    # without the gate the late reader would join the first one at once and starve the timer
    assert t[("late_reader", "in")] >= t[("timer", "out")]


def test_no_path_means_no_lock() -> None:
    with device_lock.exclusive(None), device_lock.exclusive(None), device_lock.shared(None):
        pass
