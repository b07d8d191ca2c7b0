"""The reward as a service (`cuda-agent serve`): evaluations over HTTP on a pool of judges,
durable in SQLite, with a thin client for RL engines. FastAPI, uvicorn and prometheus_client
(the `serve` extra) load only with the server; the client needs the standard library alone."""

from __future__ import annotations

from .._lazy import lazy_exports

_LAZY = {"ServiceClient": "client", "ServiceError": "client", "ServeConfig": "service", "Service": "service",
         "create_app": "app", "EvalRequest": "models", "EvalOptions": "models", "Evaluation": "models",
         "TaskSpec": "models"}

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
