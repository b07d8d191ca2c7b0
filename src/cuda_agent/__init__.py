"""cuda-agent: turn a PyTorch Model into a faster, verified custom kernel.

The public API is small: `Task` and `load_tasks` (what to optimise), `create_workspace`
(where an agent works), `evaluate` (the reward). Heavy pieces load lazily.
"""

__version__ = "0.1.0"

from .evaluation import EvalConfig, EvalResult, evaluate
from .tasks import Task, load_tasks
from .workspace import Workspace, create_workspace, open_workspace

__all__ = ["Task", "load_tasks", "Workspace", "create_workspace", "open_workspace", "evaluate",
           "EvalConfig", "EvalResult", "__version__"]
