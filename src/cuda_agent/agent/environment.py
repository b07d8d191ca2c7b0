"""The environment side of one episode, written once for every driver: the agent loop, the
token-level RL episode (verl) and TRL's tool methods. It owns the workspace (a fresh temporary
one, or one it is given and leaves in place), the `ToolExecutor`, the one rule for a call that
cannot run (an error result the model can act on, counted like any failed call) and the
verdict (`cuda_agent.evaluate`, or an injected sync or async evaluator such as a training pool).
"""

from __future__ import annotations

import asyncio
import inspect
import tempfile
from pathlib import Path
from typing import Any, Awaitable, Callable

from ..evaluation import EvalConfig, EvalResult, evaluate
from ..isolation.processes import remove_tree
from ..tasks import Task
from ..workspace import Workspace, create_workspace
from .tools import TOOL_NAMES, ToolConfig, ToolExecutor, ToolResult
from .trajectory import ToolCall

Evaluator = Callable[[Workspace, EvalConfig], "EvalResult | Awaitable[EvalResult]"]
"""`(workspace, config) -> EvalResult`, or an awaitable of one."""


class Environment:
    """One episode's workspace, tools and verdict. Close it (or use `with`) when the episode
    ends: the executor stops and a workspace it made is removed unless `keep`."""

    def __init__(self, ws: Workspace, *, tool_config: ToolConfig | None = None,
                 eval_config: EvalConfig | None = None, evaluator: Evaluator | None = None,
                 owned_dir: Path | None = None, keep: bool = False):
        self.ws = ws
        self.eval_config = eval_config or EvalConfig(backend=ws.backend)
        self.evaluator: Evaluator = evaluator or evaluate
        self.owned_dir, self.keep = owned_dir, keep
        self.calls = self.errors = 0
        try:
            self.executor = ToolExecutor.for_workspace(ws, tool_config)
        except BaseException:
            self._remove()
            raise

    @classmethod
    def fresh(cls, task: Task, backend: str | None = None, *, workdir: str | Path | None = None,
              prefix: str = "ep-", **kw: Any) -> "Environment":
        """A new workspace for `task` in a temporary folder under `workdir` (default: the system's);
        `backend` None is the local device."""
        from ..backends import default_backend_name

        base = Path(workdir) if workdir else None
        if base is not None:
            base.mkdir(parents=True, exist_ok=True)
        owned = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
        try:
            ws = create_workspace(task, owned / "ws", backend or default_backend_name())
        except BaseException:
            remove_tree(owned)
            raise
        return cls(ws, owned_dir=owned, **kw)

    # ---- tools ----------------------------------------------------------------------------------
    def execute(self, call: ToolCall) -> ToolResult:
        """Run one call; a call that cannot run is answered with an error. Counts calls and errors."""
        self.calls += 1
        if call.parse_error is not None:
            result = ToolResult(name=call.name or "?", ok=False, error=f"{call.parse_error}; the call was not run. "
                                "Send the arguments as one JSON object.")
        elif not call.name:
            result = ToolResult(name="?", ok=False,
                                error=f"a tool call needs a tool name; tools are: {', '.join(TOOL_NAMES)}")
        else:
            result = self.executor.execute(call.name, call.arguments)
        self.errors += not result.ok
        return result

    async def aexecute(self, call: ToolCall) -> ToolResult:
        """`execute` off the event loop (tools block: bash runs for minutes)."""
        return await asyncio.get_running_loop().run_in_executor(None, self.execute, call)

    # ---- the verdict ----------------------------------------------------------------------------
    def evaluate(self, config: EvalConfig | None = None) -> EvalResult:
        """The environment's verdict on the workspace as it is now (trusted; never the agent's words)."""
        result = self.evaluator(self.ws, config or self.eval_config)
        if inspect.isawaitable(result):
            getattr(result, "close", lambda: None)()  # not run: never awaited
            raise TypeError("this environment's evaluator is async: await aevaluate()")
        return result

    async def aevaluate(self, config: EvalConfig | None = None) -> EvalResult:
        """`evaluate` from async code: an async evaluator is awaited here (not queued behind tool calls
        in the thread pool), a sync one runs off the event loop."""
        config = config or self.eval_config
        if inspect.iscoroutinefunction(self.evaluator) or inspect.iscoroutinefunction(
                getattr(self.evaluator, "__call__", None)):
            return await self.evaluator(self.ws, config)
        result = await asyncio.get_running_loop().run_in_executor(None, self.evaluator, self.ws, config)
        return await result if inspect.isawaitable(result) else result

    # ---- the end --------------------------------------------------------------------------------
    def close(self) -> None:
        self.executor.close()
        self._remove()

    def _remove(self) -> None:
        if self.owned_dir is not None and not self.keep:
            remove_tree(self.owned_dir)  # the agent's workspace: any depth, any count, any modes
        self.owned_dir = None

    def __enter__(self) -> "Environment":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


__all__ = ["Environment", "Evaluator"]
