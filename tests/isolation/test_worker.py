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
