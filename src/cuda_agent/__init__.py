"""cuda-agent: turn a PyTorch Model into a faster, verified custom kernel.

The public API is small: `Task` and `load_tasks` (what to optimise), `create_workspace`
(where an agent works), `evaluate` (the reward). Names load on first use, so the CLI and
light tools start without importing torch.
"""

from __future__ import annotations

from ._lazy import lazy_exports

__version__ = "0.1.0"

_EXPORTS = {
    "EvalConfig": "evaluation", "EvalResult": "evaluation", "evaluate": "evaluation",
    "Task": "tasks", "load_tasks": "tasks",
    "Workspace": "workspace", "create_workspace": "workspace", "open_workspace": "workspace",
}

__all__ = ["Task", "load_tasks", "Workspace", "create_workspace", "open_workspace", "evaluate",
           "EvalConfig", "EvalResult", "__version__"]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
