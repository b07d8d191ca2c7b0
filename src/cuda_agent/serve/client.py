"""A thin client of `cuda-agent serve` (standard library only, so any trainer process can use it).

    client = ServiceClient("http://evalhost:8765", token="...")     # or CUDA_AGENT_SERVE_TOKEN
    result = client.evaluate("swish", {"model_new.py": ..., "kernels/swish.cpp": ...})
    print(result.reward, result.reason)

A full queue (429) is retried after the server's Retry-After hint until the call's deadline;
any other refusal raises `ServiceError` with the server's message."""

from __future__ import annotations

import asyncio
import json
import os
import time
import urllib.error
import urllib.request
from typing import Any

from ..evaluation import EvalConfig, EvalResult
from ..tasks import Task
from .models import EvalOptions, Evaluation, EpisodeState, ResetResponse, StepResponse

TOKEN_ENV = "CUDA_AGENT_SERVE_TOKEN"
URL_ENV = "CUDA_AGENT_SERVE_URL"


class ServiceError(RuntimeError):
    """The service refused a request (status, detail) or could not judge it (status 0)."""

    def __init__(self, status: int, detail: Any) -> None:
        super().__init__(f"{status}: {detail}" if status else str(detail))
        self.status, self.detail = status, detail


TaskLike = str | Task | dict[str, str]


def task_spec(task: TaskLike) -> dict[str, str]:
    """A task by name ('swish'), by source (a string holding `class Model`), or a `Task` (its source)."""
    if isinstance(task, Task):
        return {"source": task.source}
    if isinstance(task, dict):
        return task
    return {"source": task} if "class Model" in task else {"name": task}


class ServiceClient:
    def __init__(self, url: str | None = None, token: str | None = None, *, timeout_s: float = 60.0) -> None:
        self.url = (url or os.environ.get(URL_ENV) or "http://127.0.0.1:8765").rstrip("/")
        self.token = token or os.environ.get(TOKEN_ENV, "")
        self.timeout_s = timeout_s

    # --- transport ----------------------------------------------------------------------------
    def request(self, method: str, path: str, body: Any = None, *, deadline: float | None = None,
                timeout_s: float | None = None) -> Any:
        """One call; a 429 is retried after Retry-After until `deadline` (monotonic seconds)."""
        data = json.dumps(body).encode() if body is not None else None
        while True:
            req = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Authorization": f"Bearer {self.token}",
                                                  "Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=timeout_s or self.timeout_s) as resp:
                    raw = resp.read()
                    return json.loads(raw) if resp.headers.get_content_type() == "application/json" else raw.decode()
            except urllib.error.HTTPError as exc:
                detail = _detail(exc)
                if exc.code == 429 and deadline is not None:
                    pause = float(exc.headers.get("Retry-After") or 1)
                    if time.monotonic() + pause < deadline:
                        time.sleep(pause)
                        continue
                raise ServiceError(exc.code, detail) from None

    # --- evaluations --------------------------------------------------------------------------
    def submit(self, task: TaskLike, files: dict[str, str], options: EvalOptions | dict[str, Any] | None = None,
               *, wait_s: float = 0.0, deadline: float | None = None) -> Evaluation:
        body = {"task": task_spec(task), "files": files, "options": _options(options)}
        path = "/v1/evaluations" + (f"?wait={wait_s:.1f}" if wait_s > 0 else "")
        return Evaluation.model_validate(self.request("POST", path, body, deadline=deadline,
                                                      timeout_s=self.timeout_s + wait_s))

    def submit_batch(self, items: list[tuple[TaskLike, dict[str, str], EvalOptions | dict[str, Any] | None]],
                     *, deadline: float | None = None) -> list[Evaluation]:
        body = {"items": [{"task": task_spec(t), "files": f, "options": _options(o)} for t, f, o in items]}
        got = self.request("POST", "/v1/evaluations/batch", body, deadline=deadline)
        return [Evaluation.model_validate(e) for e in got["evaluations"]]

    def get(self, eval_id: str, *, wait_s: float = 0.0) -> Evaluation:
        path = f"/v1/evaluations/{eval_id}" + (f"?wait={wait_s:.1f}" if wait_s > 0 else "")
        return Evaluation.model_validate(self.request("GET", path))

    def wait(self, eval_id: str, timeout_s: float | None = None) -> Evaluation:
        """Long-poll until the evaluation is done or failed (or `timeout_s` passes)."""
        end = time.monotonic() + (timeout_s if timeout_s is not None else 3600.0)
        while True:
            left = end - time.monotonic()
            row = self.get(eval_id, wait_s=max(0.0, min(left, self.timeout_s - 5)))
            if row.status in ("done", "failed") or left <= 0:
                return row

    def evaluate(self, task: TaskLike, files: dict[str, str], options: EvalOptions | dict[str, Any] | None = None,
                 *, timeout_s: float = 3600.0) -> EvalResult:
        """Submit (retrying a full queue), wait, and return the `EvalResult`; `ServiceError` if the
        service could not judge it (e.g. interrupted by a restart)."""
        deadline = time.monotonic() + timeout_s
        row = self.submit(task, files, options, deadline=deadline)
        if row.status not in ("done", "failed"):
            row = self.wait(row.id, deadline - time.monotonic())
        if row.result is None:
            raise ServiceError(0, row.error or f"evaluation {row.id} not finished ({row.status})")
        return row.result

    async def aevaluate(self, task: TaskLike, files: dict[str, str],
                        options: EvalOptions | dict[str, Any] | None = None, *, timeout_s: float = 3600.0
                        ) -> EvalResult:
        """`evaluate` for async callers (verl's reward loop, agent loops): runs in a thread."""
        return await asyncio.to_thread(self.evaluate, task, files, options, timeout_s=timeout_s)

    def health(self) -> dict[str, Any]:
        return self.request("GET", "/v1/health")

    # --- OpenEnv-style episodes ---------------------------------------------------------------
    def reset(self, task: TaskLike, options: EvalOptions | dict[str, Any] | None = None,
              max_steps: int = 10) -> ResetResponse:
        body = {"task": task_spec(task), "options": _options(options), "max_steps": max_steps}
        return ResetResponse.model_validate(self.request("POST", "/v1/env/reset", body))

    def step(self, episode_id: str, files: dict[str, str], wait_s: float = 600.0) -> StepResponse:
        body = {"episode_id": episode_id, "files": files, "wait_s": wait_s}
        return StepResponse.model_validate(self.request("POST", "/v1/env/step", body, deadline=time.monotonic()
                                                        + wait_s, timeout_s=self.timeout_s + wait_s))

    def state(self, episode_id: str) -> EpisodeState:
        return EpisodeState.model_validate(self.request("GET", f"/v1/env/state/{episode_id}"))


def _options(options: EvalOptions | EvalConfig | dict[str, Any] | None) -> dict[str, Any]:
    if options is None:
        return {}
    if isinstance(options, EvalConfig):
        options = EvalOptions.from_config(options)
    if isinstance(options, EvalOptions):
        return options.model_dump(exclude_none=True)
    return dict(options)


def _detail(exc: urllib.error.HTTPError) -> Any:
    try:
        return json.loads(exc.read()).get("detail")
    except (ValueError, AttributeError, OSError):
        return exc.reason


__all__ = ["ServiceClient", "ServiceError", "TOKEN_ENV", "URL_ENV", "task_spec"]
