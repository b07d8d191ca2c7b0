"""The environment as TRL sees it (`GRPOTrainer(environment_factory=...)`): one instance per
rollout; `reset(**row)` lays out a fresh workspace; each public method is one of the agent's
tools, generated from its pydantic argument model (TRL reads signatures and docstrings), so the
two cannot drift; `get_reward()` evaluates the final workspace.
"""

from __future__ import annotations

import contextlib
import inspect
import threading
import types
import typing
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from ...agent.environment import Environment
from ...agent.tools import TOOLS, ToolConfig, ToolSpec
from ...agent.trajectory import ToolCall
from ...evaluation import EvalConfig, EvalResult
from ...tasks import Task
from ..metrics import verdict
from ..progress import PhaseClock


class EpisodeLog:
    """Thread-safe sink of finished episodes' verdicts, drained by the metrics callback each step."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[dict[str, Any]] = []

    def add(self, item: dict[str, Any]) -> None:
        with self._lock:
            self._items.append(item)

    def drain(self) -> list[dict[str, Any]]:
        with self._lock:
            items, self._items = self._items, []
        return items


class KernelEnvBase:
    """State and lifecycle; the tool methods are added by `make_env_class`."""

    tasks: dict[str, Task] = {}
    backend: str | None = None  # None: the local device
    eval_config: EvalConfig = EvalConfig()
    tool_config: ToolConfig | None = None
    workdir: str | None = None
    log: EpisodeLog = EpisodeLog()
    eval_concurrency: int = 1
    clock: PhaseClock | None = None  # where tool and evaluation time is counted (progress.py)
    _live: "weakref.WeakSet[KernelEnvBase]" = weakref.WeakSet()  # make_env_class gives each class its own

    def __init__(self) -> None:
        self._env: Environment | None = None
        self._result: EvalResult | None = None
        self._episode = 0
        type(self)._live.add(self)

    def reset(self, **row: Any) -> str | None:
        """Fresh workspace for `row['task_name']` (a key of `tasks`). Returns nothing: the prompt
        already holds the task statement."""
        self._cleanup()
        name = row.get("task_name")
        if name not in self.tasks:
            raise KeyError(f"row names task {name!r}, which is not among the {len(self.tasks)} tasks of this run")
        self._env = Environment.fresh(self.tasks[name], self.backend, workdir=self.workdir, prefix="trl-ep-",
                                      tool_config=self.tool_config, eval_config=self.eval_config)
        self._episode = self.clock.new_episode() if self.clock else 0

    def _phase(self, name: str, detail: str) -> Any:
        return self.clock.phase(name, detail) if self.clock else contextlib.nullcontext()

    def _what(self) -> str:
        return f"episode {self._episode} ({self._env.ws.task.name if self._env else '?'})"

    def get_reward(self) -> float:
        """The milestone reward of the final workspace. TRL asks one environment after another once
        the batch has finished, so with `eval_concurrency` > 1 the first call evaluates every
        finished workspace at once (builds are CPU-bound and dominate)."""
        if self._env is None:
            raise RuntimeError("get_reward() before reset()")
        if self._result is None and self.eval_concurrency > 1:
            self._evaluate_pending()
        env = self._env
        result = self._result
        if result is None:
            with self._phase("evaluation", f"judging the final workspace of {self._what()}"):
                result = env.evaluate()
        self.log.add({"task": env.ws.task.name, **verdict(result, env.calls, env.errors),
                      "reason": result.reason.splitlines()[0] if result.reason else ""})
        self._cleanup()
        return float(result.reward)

    def _evaluate_pending(self) -> None:
        pending = [e for e in list(type(self)._live) if e._env is not None and e._result is None]
        with (self._phase("evaluation", f"judging {len(pending)} final workspaces, {self.eval_concurrency} at once"),
              ThreadPoolExecutor(max_workers=min(self.eval_concurrency, len(pending))) as pool):
            for env, res in zip(pending, pool.map(lambda e: e._env.evaluate(), pending)):
                env._result = res

    def _run_tool(self, name: str, arguments: dict[str, Any]) -> str:
        if self._env is None:
            raise RuntimeError("tool called before reset()")
        args = {k: v for k, v in arguments.items() if v is not None}
        shown = f" {str(args.get('command') or args.get('path') or '')[:60]!r}" if args else ""
        with self._phase("tools", f"{name}{shown} in {self._what()}"):
            return self._env.execute(ToolCall(id="", name=name, arguments=args)).text

    def _cleanup(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None
        self._result = None

    def __del__(self) -> None:  # pools are dropped at the end of training
        try:
            self._cleanup()
        except Exception:
            pass


def make_env_class(tasks: list[Task], *, backend: str, eval_config: EvalConfig, tool_config: ToolConfig | None = None,
                   workdir: str | None = None, log: EpisodeLog | None = None,
                   eval_concurrency: int = 1, clock: PhaseClock | None = None) -> type[KernelEnvBase]:
    """A TRL environment class bound to `tasks`; pass the class itself as `environment_factory`."""
    attrs: dict[str, Any] = {
        "tasks": {t.name: t for t in tasks}, "backend": backend, "eval_config": eval_config,
        "tool_config": tool_config, "workdir": workdir, "log": log or EpisodeLog(),
        "eval_concurrency": max(1, int(eval_concurrency)), "_live": weakref.WeakSet(), "clock": clock,
    }
    for spec in TOOLS:
        attrs[spec.name] = _tool_method(spec)
    return type("CudaKernelEnv", (KernelEnvBase,), attrs)


def _tool_method(spec: ToolSpec) -> Callable[..., str]:
    """A method `spec.name(self, <args>) -> str` whose signature and Google docstring describe
    the agent's argument model, and which runs the call through the agent's executor."""
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    doc_args = []
    for name, field in spec.args.model_fields.items():
        hint = _json_hint(field.annotation)
        default = inspect.Parameter.empty if field.is_required() else None
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hint))
        annotations[name] = hint
        desc = field.description or name
        if name == "edits":
            desc += ' Each edit is an object {"old_string": str, "new_string": str, "replace_all": bool (optional)}.'
        doc_args.append(f"    {name}: {' '.join(desc.split())}")
    annotations["return"] = str

    def method(self: KernelEnvBase, **kwargs: Any) -> str:
        return self._run_tool(spec.name, kwargs)

    method.__name__ = method.__qualname__ = spec.name
    method.__signature__ = inspect.Signature(params, return_annotation=str)  # type: ignore[attr-defined]
    method.__annotations__ = annotations
    method.__doc__ = f"{spec.description}\n\nArgs:\n" + "\n".join(doc_args) + "\n\nReturns:\n    The tool's output."
    return method


def _json_hint(annotation: Any) -> Any:
    """Map a pydantic field type to one transformers can turn into JSON schema."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _json_hint(inner[0]) | None if len(inner) == 1 else annotation
    if origin is list:
        (item,) = typing.get_args(annotation) or (Any,)
        return list[dict] if isinstance(item, type) and hasattr(item, "model_fields") else list[_json_hint(item)]
    return annotation


__all__ = ["KernelEnvBase", "EpisodeLog", "make_env_class"]
