"""`cuda-agent serve`: the reward service (only typer is imported here)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    app.command()(serve)


def serve(
    host: str = typer.Option("127.0.0.1", help="address to bind"),
    port: int = typer.Option(8765, help="port"),
    db: Path = typer.Option(Path("serve.sqlite"), help="SQLite store of accepted requests and results"),
    backend: Optional[str] = typer.Option(None, help="cuda or cpu (default: the local device)"),
    pool: str = typer.Option("local", help="local (slot processes on this machine) or ray (a Ray cluster)"),
    slots: int = typer.Option(1, help="CPU slots (on a GPU backend: one per visible device)"),
    devices: Optional[str] = typer.Option(None, help="GPU indices, e.g. 0,1 (default: all visible)"),
    ray_address: Optional[str] = typer.Option(None, help="Ray cluster address (default: start a local one)"),
    max_queue: int = typer.Option(256, help="accepted requests waiting for a judge; beyond it: 429 + Retry-After"),
    max_timeout: float = typer.Option(600.0, help="cap on a request's evaluation time limit, seconds"),
    memory_limit_gb: float = typer.Option(16.0, help="a candidate worker's memory cap"),
    max_file_bytes: int = typer.Option(256 * 1024, help="largest candidate file or task source"),
    max_body_bytes: int = typer.Option(8 << 20, help="largest request body"),
    tasks: list[str] = typer.Option([], "--tasks", help="task sources known by name (repeatable), besides "
                                    "the bundled examples"),
    token: Optional[str] = typer.Option(None, help="bearer token every request must carry (default: "
                                        "$CUDA_AGENT_SERVE_TOKEN)"),
    print_openapi: bool = typer.Option(False, "--print-openapi", help="print the OpenAPI schema and exit"),
) -> None:
    """Serve the reward over HTTP: a pool of judges behind a bounded, durable queue (docs/serve.md)."""
    from ..exit_codes import fail
    from .app import create_app
    from .service import ServeConfig

    config = ServeConfig(db=db, **({"backend": backend} if backend else {}), pool=pool, slots=slots,  # type: ignore[arg-type]
                         devices=[int(d) for d in devices.split(",")] if devices else None, ray_address=ray_address,
                         max_queue=max_queue, max_timeout_s=max_timeout, memory_limit_gb=memory_limit_gb,
                         max_file_bytes=max_file_bytes, tasks=tasks)
    if print_openapi:
        typer.echo(json.dumps(_schema_app(config), indent=1))
        return
    token = token or os.environ.get("CUDA_AGENT_SERVE_TOKEN")
    if not token:
        raise fail("the service needs a token: --token or CUDA_AGENT_SERVE_TOKEN (no token, no evaluation)")
    import uvicorn

    app = create_app(config, token, max_body_bytes=max_body_bytes)
    typer.echo(f"cuda-agent serve: http://{host}:{port} ({backend}, {pool} pool, store {db})", err=True)
    uvicorn.run(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=30)


def _schema_app(config: object) -> dict:
    """The OpenAPI schema, from an app whose service never starts (a throwaway store)."""
    import tempfile

    from .app import create_app
    from .service import ServeConfig, Service

    assert isinstance(config, ServeConfig)
    with tempfile.TemporaryDirectory() as tmp:
        svc = Service(config.model_copy(update={"db": Path(tmp) / "schema.sqlite"}))
        try:
            return create_app(config, "schema", service=svc).openapi()
        finally:
            svc.store.close()
