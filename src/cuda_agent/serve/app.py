"""The HTTP face of the service (FastAPI): routes, the bearer-token gate, size limits, and
errors as clear 4xx. Everything it does is a call into `Service`."""

from __future__ import annotations

import asyncio
import hmac
import tempfile
import time
import uuid
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

from fastapi import FastAPI, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from .models import (BatchRequest, BatchResponse, DeviceState, EpisodeReset, EpisodeState, EpisodeStep, EvalRequest,
                     Evaluation, Health, ResetResponse, StepResponse)
from .service import Busy, ServeConfig, ServeError, Service

FINAL = ("done", "failed")
MAX_WAIT_S = 3600.0


class _Gate:
    """ASGI middleware: no token, no service (every path, the schema and metrics included); a
    body must declare its length and stay under the limit. Counts every response by route."""

    def __init__(self, app: Any, token: str, max_body_bytes: int, service: Service) -> None:
        self.app, self.token, self.max_body, self.service = app, token.encode(), max_body_bytes, service

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        auth = headers.get(b"authorization", b"")
        given = auth[7:].strip() if auth[:7].lower() == b"bearer " else b""
        route = _route(scope.get("path", ""))
        if not given or not hmac.compare_digest(given, self.token):
            self.service.metrics.rejected.labels("auth").inc()
            return await _reply(send, 401, "a bearer token is required: Authorization: Bearer <token>", route,
                                self.service, [(b"www-authenticate", b"Bearer")])
        if scope.get("method") in ("POST", "PUT", "PATCH"):
            length = headers.get(b"content-length")
            if length is None or not length.isdigit():
                return await _reply(send, 411, "a request body must carry Content-Length", route, self.service)
            if int(length) > self.max_body:
                self.service.metrics.rejected.labels("too_large").inc()
                return await _reply(send, 413, f"request body of {int(length)} bytes is over the limit of "
                                    f"{self.max_body}", route, self.service)

        async def counted(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                self.service.metrics.http.labels(route, str(message["status"])).inc()
            await send(message)

        await self.app(scope, receive, counted)


def _route(path: str) -> str:
    """The route without ids (bounded label values)."""
    parts = path.strip("/").split("/")
    if len(parts) >= 3 and parts[:2] == ["v1", "evaluations"] and parts[2] != "batch":
        return "/v1/evaluations/{id}"
    if len(parts) >= 4 and parts[:3] == ["v1", "env", "state"]:
        return "/v1/env/state/{id}"
    known = {"v1/evaluations", "v1/evaluations/batch", "v1/health", "v1/devices", "v1/tasks", "metrics",
             "openapi.json", "v1/env/reset", "v1/env/step"}
    return "/" + path.strip("/") if path.strip("/") in known else "other"


async def _reply(send: Any, status: int, detail: str, route: str, service: Service,
                 extra: list[tuple[bytes, bytes]] | None = None) -> None:
    import json

    body = json.dumps({"detail": detail}).encode()
    service.metrics.http.labels(route, str(status)).inc()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *(extra or [])]})
    await send({"type": "http.response.body", "body": body})


class _Waiters:
    """Long polls: an event per waiting request, set from the pool's thread when its id finishes."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self.loop: asyncio.AbstractEventLoop | None = None
        self.events: dict[str, list[asyncio.Event]] = {}

    def notify(self, key: str) -> None:
        if self.loop is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self._fire, key)

    def _fire(self, key: str) -> None:
        for ev in self.events.pop(key, []):
            ev.set()

    async def wait(self, key: str, timeout_s: float) -> Evaluation | None:
        ev = asyncio.Event()
        self.events.setdefault(key, []).append(ev)
        try:
            row = self.service.get(key)
            if row is None or row.status in FINAL or timeout_s <= 0:
                return row
            try:
                await asyncio.wait_for(ev.wait(), timeout_s)
            except asyncio.TimeoutError:
                pass
            return self.service.get(key)
        finally:
            waiting = self.events.get(key, [])
            if ev in waiting:
                waiting.remove(ev)
            if not waiting:
                self.events.pop(key, None)


def create_app(config: ServeConfig, token: str, *, max_body_bytes: int = 8 << 20,
               service: Service | None = None) -> FastAPI:
    """The ASGI app; its lifespan starts the service (recovering the store) and stops it."""
    if not token:
        raise ValueError("the service needs a token (no token, no evaluation): --token or CUDA_AGENT_SERVE_TOKEN")
    svc = service or Service(config)
    waiters = _Waiters(svc)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        waiters.loop = asyncio.get_running_loop()
        svc.on_finish(waiters.notify)
        await run_in_threadpool(svc.start)
        try:
            yield
        finally:
            await run_in_threadpool(svc.close)

    app = FastAPI(title="cuda-agent reward service", version="1",
                  description="Evaluate candidate kernels (build, verify, time, reward -1/1/2/3) on a pool of judges. "
                  "Every request needs `Authorization: Bearer <token>`.", lifespan=lifespan,
                  docs_url=None, redoc_url=None)
    app.state.service = svc

    @app.exception_handler(ServeError)
    async def _refused(request: Request, exc: ServeError) -> JSONResponse:
        headers = {"Retry-After": str(exc.retry_after)} if isinstance(exc, Busy) else None
        if not isinstance(exc, Busy):
            svc.metrics.rejected.labels("bad_input" if exc.status == 422 else "too_large").inc()
        return JSONResponse({"detail": exc.message}, status_code=exc.status, headers=headers)

    responses: dict[int | str, dict[str, Any]] = {
        401: {"description": "no or wrong bearer token"}, 413: {"description": "over a size limit"},
        422: {"description": "malformed request, unknown task, bad file path"},
        429: {"description": "queue full; retry after the Retry-After header's seconds"}}

    async def answer(rows: list[Evaluation], wait_s: float) -> list[Evaluation]:
        if wait_s <= 0:
            return rows
        deadline = time.monotonic() + wait_s
        out = []
        for row in rows:
            if row.status in FINAL:
                out.append(row)
                continue
            got = await waiters.wait(row.id, max(0.0, deadline - time.monotonic()))
            out.append(got.model_copy(update={"cached": row.cached}) if got else row)
        return out

    @app.post("/v1/evaluations", response_model=Evaluation, status_code=202, responses=responses)
    async def submit(req: EvalRequest, response: Response,
                     wait: float = Query(0.0, ge=0, le=MAX_WAIT_S, description="seconds to wait for the verdict")
                     ) -> Evaluation:
        """Submit one evaluation: 202 when accepted (or still running), 200 when the verdict is in."""
        rows = await answer(await run_in_threadpool(svc.submit, [req]), wait)
        response.status_code = 200 if rows[0].status in FINAL else 202
        return rows[0]

    @app.post("/v1/evaluations/batch", response_model=BatchResponse, status_code=202, responses=responses)
    async def submit_batch(req: BatchRequest, response: Response,
                           wait: float = Query(0.0, ge=0, le=MAX_WAIT_S)) -> BatchResponse:
        """Submit a batch, admitted all or nothing; ids in the order of the items."""
        rows = await answer(await run_in_threadpool(svc.submit, req.items), wait)
        response.status_code = 200 if all(r.status in FINAL for r in rows) else 202
        return BatchResponse(evaluations=rows)

    @app.get("/v1/evaluations/{eval_id}", response_model=Evaluation, responses={404: {"description": "unknown id"}})
    async def get_evaluation(eval_id: str, wait: float = Query(0.0, ge=0, le=MAX_WAIT_S,
                                                               description="seconds to wait for the verdict")
                             ) -> Evaluation | JSONResponse:
        """One evaluation's state and, once done, its result (long-polls up to `wait` seconds)."""
        row = await waiters.wait(eval_id, wait)
        if row is None:
            return JSONResponse({"detail": f"no evaluation {eval_id}"}, status_code=404)
        return row

    @app.get("/v1/health", response_model=Health)
    async def health() -> Health:
        """Queue depth, running evaluations, stored counts, recent latency and throughput."""
        return await run_in_threadpool(svc.health)

    @app.get("/v1/devices", response_model=list[DeviceState])
    async def devices() -> list[DeviceState]:
        """Per judge slot: evaluations completed and failed, busy time, utilisation."""
        return svc.device_states()

    @app.get("/v1/tasks", response_model=list[str])
    async def tasks() -> list[str]:
        """Task names the server knows (bundled examples and its --tasks)."""
        return svc.task_names()

    @app.get("/metrics", response_class=PlainTextResponse)
    async def metrics() -> Response:
        """Prometheus metrics (scrape with the bearer token)."""
        svc.device_states()  # refresh the utilisation gauges
        return Response(generate_latest(svc.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    # --- OpenEnv-style episodes: reset / step / state ------------------------------------------
    @app.post("/v1/env/reset", response_model=ResetResponse, responses=responses)
    async def env_reset(req: EpisodeReset) -> ResetResponse:
        """Start an episode: the workspace the agent would see (its files), and the episode's state."""
        task = svc.resolve_task(req.task.name, req.task.source)
        files = await run_in_threadpool(_starter_files, task, svc.config.backend)
        state = EpisodeState(episode_id=uuid.uuid4().hex, task=task.name, step_count=0, max_steps=req.max_steps,
                             done=False)
        svc.store.put_episode(state.episode_id, {"state": state.model_dump(), "reset": req.model_dump(mode="json")})
        return ResetResponse(episode_id=state.episode_id, observation=files, state=state)

    @app.post("/v1/env/step", response_model=StepResponse, responses={**responses, 404: {"description": "unknown "
              "episode"}, 409: {"description": "episode is done"}, 504: {"description": "not judged within wait_s"}})
    async def env_step(req: EpisodeStep) -> StepResponse | JSONResponse:
        """Act: submit the candidate's files; observe their evaluation; reward = the milestone reward."""
        saved = svc.store.episode(req.episode_id)
        if saved is None:
            return JSONResponse({"detail": f"no episode {req.episode_id}"}, status_code=404)
        state = EpisodeState.model_validate(saved["state"])
        if state.done:
            return JSONResponse({"detail": "the episode is done; reset to start another"}, status_code=409)
        reset = EpisodeReset.model_validate(saved["reset"])
        rows = await run_in_threadpool(svc.submit, [EvalRequest(task=reset.task, files=req.files,
                                                                options=reset.options)])
        row = (await answer(rows, req.wait_s))[0]
        if row.status not in FINAL:
            return JSONResponse({"detail": f"evaluation {row.id} not judged within {req.wait_s} s; "
                                 f"GET /v1/evaluations/{row.id}"}, status_code=504)
        reward = float(row.result.reward) if row.result else -1.0
        state = state.model_copy(update={"step_count": state.step_count + 1, "last_reward": reward,
                                         "evaluation_ids": [*state.evaluation_ids, row.id]})
        state.done = state.step_count >= state.max_steps or reward >= 3
        svc.store.put_episode(state.episode_id, {"state": state.model_dump(), "reset": saved["reset"]})
        return StepResponse(observation=row, reward=reward, done=state.done, state=state)

    @app.get("/v1/env/state/{episode_id}", response_model=EpisodeState, responses={404: {"description": "unknown"}})
    async def env_state(episode_id: str) -> EpisodeState | JSONResponse:
        saved = svc.store.episode(episode_id)
        if saved is None:
            return JSONResponse({"detail": f"no episode {episode_id}"}, status_code=404)
        return EpisodeState.model_validate(saved["state"])

    app.add_middleware(_Gate, token=token, max_body_bytes=max_body_bytes, service=svc)
    return app


def _starter_files(task: Any, backend: str) -> dict[str, str]:
    """The files of a fresh workspace for `task` that an agent reads or edits."""
    from ..workspace import create_workspace

    with tempfile.TemporaryDirectory(prefix="cuda-agent-env-") as tmp:
        ws = create_workspace(task, Path(tmp) / "ws", backend)
        names = ["SKILL.md", "model.py", "model_new.py"] + sorted(
            f"kernels/{p.name}" for p in (ws.root / "kernels").iterdir() if p.is_file())
        return {n: (ws.root / n).read_text(errors="replace") for n in names if (ws.root / n).is_file()}


__all__ = ["create_app"]
