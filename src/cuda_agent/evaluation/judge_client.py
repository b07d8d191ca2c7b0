"""The caller's side of the judge: one judge process per backend (device), started on first
use, kept warm across evaluations, restarted if it dies, killed with its parent.

The pipes to the judge are the judge's own channel: no candidate process ever holds them
(candidates are the judge's children and inherit only their private socket).
"""

from __future__ import annotations

import atexit
import json
import os
import select
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..isolation.processes import child_environment
from ..isolation.worker import WatchedProcess

START_TIMEOUT_S = 300.0


class JudgeFault(Exception):
    """The trusted side failed (judge crashed, hung, or the task itself is broken)."""


class JudgeClient(WatchedProcess):
    def __init__(self, backend: str) -> None:
        self.backend = backend
        req_r, self._req_w = os.pipe()
        self._ans_r, ans_w = os.pipe()
        env = child_environment()
        super().__init__([sys.executable, "-m", "cuda_agent.evaluation.judge", str(req_r), str(ans_w), backend],
                         env=env, scratch=None, log_prefix="cuda-agent-judge-", pass_fds=(req_r, ans_w),
                         who=f"the {backend} judge")
        os.close(req_r)
        os.close(ans_w)
        self._closers = [lambda: os.close(self._req_w), lambda: os.close(self._ans_r)]
        self._buf = b""
        self._turn = threading.Lock()
        hello = self._read(time.monotonic() + START_TIMEOUT_S, "starting")
        if hello.get("type") != "ready":
            self.close()
            raise JudgeFault(f"the {backend} judge did not start: {hello.get('message', hello)}")
        self.device = str(hello.get("device", ""))

    def request(self, req: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """One request and its answer; threads take turns (the judge answers in order, and one
        evaluation at a time is what keeps timings apart on a device)."""
        with self._turn:
            try:
                os.write(self._req_w, (json.dumps(req) + "\n").encode())
            except OSError:
                raise JudgeFault(f"the {self.backend} judge is gone: {self.log_tail()[-500:]}") from None
            return self._read(time.monotonic() + timeout_s, "evaluating")

    def _read(self, deadline: float, doing: str) -> dict[str, Any]:
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                self.close()
                raise JudgeFault(f"the {self.backend} judge timed out while {doing}")
            ready, _, _ = select.select([self._ans_r], [], [], min(left, 1.0))
            if not ready:
                if not self.alive():
                    raise JudgeFault(f"the {self.backend} judge died while {doing}: {self.log_tail()[-800:]}")
                continue
            chunk = os.read(self._ans_r, 1 << 20)
            if not chunk:
                raise JudgeFault(f"the {self.backend} judge died while {doing}: {self.log_tail()[-800:]}")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)


_judges: dict[str, JudgeClient] = {}
_starting = threading.Lock()
_keeper: ThreadPoolExecutor | None = None


def get_judge(backend: str) -> JudgeClient:
    """This process's judge for `backend`, started (or restarted) as needed; threads share it
    (two threads that each started one left a judge behind, holding its device memory). It is
    started from one thread that lives as long as this process: a judge dies with the thread
    that started it (PDEATHSIG), and a worker thread that ended took its judge along mid-evaluation."""
    global _keeper
    with _starting:
        judge = _judges.get(backend)
        if judge is None or not judge.alive():
            if judge is not None:
                judge.close()
            if _keeper is None:
                _keeper = ThreadPoolExecutor(1, thread_name_prefix="cuda-agent-judge-keeper")
            judge = _judges[backend] = _keeper.submit(JudgeClient, backend).result()
        return judge


def drop_judge(backend: str) -> None:
    judge = _judges.pop(backend, None)
    if judge is not None:
        judge.close()


@atexit.register
def _close_all() -> None:
    for name in list(_judges):
        drop_judge(name)
