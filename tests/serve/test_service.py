"""`Service` without HTTP or judges: what admission does in the HTTP thread pool."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from cuda_agent.backends.slots import LocalSlots
from cuda_agent.backends.devices import SlotSpec
from cuda_agent.serve.service import ServeConfig, Service
from tests.conftest import RELU_TASK


def test_task_sources_resolve_from_many_threads_at_once(tmp_path: Path) -> None:
    """The load test once got a 500 here: two HTTP threads parsing task sources at once raised
    CPython 3.11's `SystemError: AST constructor recursion depth mismatch`. Parsing is serialised and
    a source seen lately is answered from memory (the same Task)."""
    svc = Service(ServeConfig(db=tmp_path / "s.sqlite", backend="cpu"), slots=LocalSlots([SlotSpec("cpu:0")]))
    try:
        nested = "x = " + "[" * 40 + "]" * 40 + "\n"
        sources = [RELU_TASK + nested + f"# {i}\n" for i in range(400)]
        with ThreadPoolExecutor(16) as pool:
            tasks = list(pool.map(lambda s: svc.resolve_task(None, s), sources + sources[:50]))
        assert len({t.name for t in tasks[:400]}) == 400
        assert [t.name for t in tasks[400:]] == [t.name for t in tasks[:50]]
        assert svc.resolve_task(None, sources[-1]) is tasks[399]  # recent: not parsed again
    finally:
        svc.store.close()
