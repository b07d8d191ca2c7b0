"""Worker-side handlers for synthesis and checking: plan -> code -> size -> filters.

The parent sees the code twice: once at the smallest size (so it can screen similarity before
the worker spends time on sizing, timing and torch.compile), and once final, with the result.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from pydantic import BaseModel, Field

from . import device_lock
from .config import ComposeConfig, FilterConfig
from .filters import Reason, TaskCheck, check_task, time_model
from .plan import Plan


class SynthRequest(BaseModel):
    plan: Plan
    compose: ComposeConfig = Field(default_factory=ComposeConfig)
    filters: FilterConfig = Field(default_factory=FilterConfig)


class CheckRequest(BaseModel):
    source: str
    filters: FilterConfig = Field(default_factory=FilterConfig)


def synth_candidate(request: dict[str, Any], backend_name: str, wait_line: Callable[[], str]) -> Iterator[dict[str, Any]]:
    """Compose the plan, let the parent screen it, then size and filter it."""
    import torch

    from ..backends import get_backend
    from .compose import ComposeError, make_input, realize, render, size_plan

    req = SynthRequest.model_validate(request)
    backend = get_backend(backend_name)
    device = torch.device(backend.torch_device)
    t0 = time.perf_counter()
    try:
        cap = req.compose.tensor_cap_bytes(backend_name)
        sketch = render(realize(req.plan, 1 if req.plan.rank > 1 else 64, device, max_bytes=cap))
    except ComposeError as exc:
        yield _result(TaskCheck(ok=False, reason=Reason.COMPOSE_ERROR, detail=str(exc), device=backend.device_name()))
        return
    sketched = time.perf_counter()
    yield {"type": "code", "code": sketch}
    if wait_line() != "proceed":
        return
    screened = time.perf_counter()  # the parent's screen, and its answer's way back
    window = req.filters.window(backend_name)
    filters = req.filters
    measures: list[float] = []

    def measure(real: Any) -> float:
        # An estimate that only steers the size. Under quiet timing it is taken alongside the
        # other workers (shared), so only the runtime filter's timing makes them all wait.
        x = make_input(real.plan, real.input_shape, device)
        lock = (device_lock.shared(filters.shared_lock(), backend.synchronize) if filters.quiet_timing
                else device_lock.exclusive(filters.gpu_lock))
        t = time.perf_counter()
        with torch.no_grad(), lock:
            measures.append(time.perf_counter() - t)  # waiting for the lock
            return time_model(lambda: real.run(x), backend, max(3, filters.timing_runs // 2), filters.timing_budget_ms)

    try:
        real, sized_ms = size_plan(req.plan, device, measure, window, req.compose.tensor_cap_bytes(backend_name),
                                   req.compose.max_scale_steps,
                                   lambda: device_lock.shared(filters.shared_lock(), backend.synchronize))
        code = render(real)
    except ComposeError as exc:
        yield _result(TaskCheck(ok=False, reason=Reason.COMPOSE_ERROR, detail=str(exc), device=backend.device_name()))
        return
    compose_s = time.perf_counter() - t0
    # where composing went (issue 30: 7 s of it per candidate on four H200s, the filters 0.1-5 s)
    phases = {"sketch_s": sketched - t0, "screen_wait_s": screened - sketched, "size_s": time.perf_counter() - screened,
              "size_steps": len(measures), "size_lock_wait_s": sum(measures)}
    del real
    check = check_task(code, filters, backend_name)
    yield {"type": "result", "check": check.model_dump(mode="json"), "code": code, "sized_ms": sized_ms,
           "compose_s": compose_s, "compose_phases": {k: round(v, 4) for k, v in phases.items()}}


def check_source(request: dict[str, Any], backend_name: str) -> TaskCheck:
    req = CheckRequest.model_validate(request)
    return check_task(req.source, req.filters, backend_name)


def _result(check: TaskCheck) -> dict[str, Any]:
    return {"type": "result", "check": check.model_dump(mode="json")}
