"""cuda-agent: turn a PyTorch Model into a faster, verified custom kernel.

The public API is small: `Task` and `load_tasks` (what to optimise), `create_workspace`
(where an agent works), `evaluate` (the reward). Names load on first use, so the CLI and
light tools start without importing torch.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "EvalConfig": "evaluation", "EvalResult": "evaluation", "evaluate": "evaluation",
    "Task": "tasks", "load_tasks": "tasks",
    "Workspace": "workspace", "create_workspace": "workspace", "open_workspace": "workspace",
}

__all__ = ["Task", "load_tasks", "Workspace", "create_workspace", "open_workspace", "evaluate",
           "EvalConfig", "EvalResult", "__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cuda_agent' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
