"""What a judge slot runs for one request (in the slot's process, kept warm between requests):
JSON in, JSON out, so nothing pickled by a client ever reaches a judge."""

from __future__ import annotations

from typing import Any


def run_job(job: tuple[str, dict[str, Any]]) -> str:
    """Evaluate one stored request (`(id, job)`); the `EvalResult` as JSON."""
    from ..evaluation import EvalConfig, evaluate_files
    from ..tasks import Task

    _, spec = job
    task = Task.model_validate_json(spec["task"])
    config = EvalConfig.model_validate_json(spec["config"])
    return evaluate_files(task, spec["backend"], spec["files"], config).model_dump_json()


__all__ = ["run_job"]
