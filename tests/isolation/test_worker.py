"""A watched child: what the watch killed it for is the reason given, however often it looks again."""

from __future__ import annotations

import os
import sys
import time

from cuda_agent.isolation import worker
from cuda_agent.isolation.worker import WatchedProcess


def test_the_kill_reason_outlives_later_scans(tmp_path, monkeypatch):
    child = WatchedProcess([sys.executable, "-c", "import time; time.sleep(60)"], env=dict(os.environ),
                           scratch=tmp_path, log_prefix="watch-test-", memory_limit_bytes=1, who="the child")
    try:
        monkeypatch.setattr(worker, "WATCH_INTERVAL_S", 0.0)
        child._watch()  # any resident memory is over a 1-byte limit: killed
        assert child._killed_for and child._killed_for.startswith("out of memory"), child._killed_for
        time.sleep(0.1)
        child._watch()  # nothing left to scan: the reason must not be forgotten
        assert child._death_reason("closed").startswith("out of memory")
    finally:
        child.close()


def test_the_log_tail_is_read_from_the_end_not_whole(tmp_path) -> None:
    """The candidate writes its own log: one seek to just under the file-size limit makes a
    sparse file of that size (red team round 6: 1 GiB read whole cost the judge 1-1.6 GiB)."""
    import tracemalloc
    from types import SimpleNamespace

    from cuda_agent.isolation.worker import LOG_TAIL_CHARS, WatchedProcess

    log = tmp_path / "candidate.log"
    with log.open("wb") as fh:
        fh.seek(256 << 20)
        fh.write(b"the last words")
    tracemalloc.start()
    try:
        tail = WatchedProcess.log_tail(SimpleNamespace(_log=SimpleNamespace(name=str(log))))  # type: ignore[arg-type]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert tail.endswith("the last words") and len(tail) == LOG_TAIL_CHARS
    assert peak < 1 << 20, peak
