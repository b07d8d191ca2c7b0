"""Evaluate a candidate sent as files (a few KB of text) instead of a workspace on disk: the form
in which remote evaluators (the training pool's Ray actors, `cuda-agent serve`) receive work.

One rule for which paths a candidate may send, so every remote path accepts the same files."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from ..tasks import Task
from ..workspace import create_workspace
from .config import EvalConfig
from .records import EvalResult

_KERNEL_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


def is_candidate_path(rel: str) -> bool:
    """The agent-owned paths: `model_new.py` and plain files directly in `kernels/`."""
    if rel == "model_new.py":
        return True
    if not rel.startswith("kernels/"):
        return False
    name = rel[len("kernels/"):]
    return bool(_KERNEL_NAME.match(name)) and ".." not in name


def evaluate_files(task: Task, backend: str, files: dict[str, str], config: EvalConfig) -> EvalResult:
    """Rebuild a fresh workspace from the task and the candidate files, then evaluate it.
    Paths that are not the candidate's (see `is_candidate_path`) are ignored."""
    from .evaluator import evaluate

    with tempfile.TemporaryDirectory(prefix="cuda-agent-eval-") as tmp:
        ws = create_workspace(task, Path(tmp) / "ws", backend)
        for rel, text in files.items():
            if is_candidate_path(rel):
                (ws.root / rel).write_text(text)
        return evaluate(ws, config)


__all__ = ["evaluate_files", "is_candidate_path"]
