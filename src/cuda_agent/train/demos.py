"""Scripted successful episodes from the bundled examples' solutions: RFT rows for a policy that
has never called a tool.

Why: a small model (SmolLM2-135M) never emits a well-formed tool call on its own, so RL from it
has reward -1 everywhere and no gradient. Known-correct solutions stand in for the successful
trajectories the paper's stage 2 fine-tunes on: the task prompt, one turn of `write_file` calls
(really executed), and a closing message, with the tool schemas TRL renders for our environment.
"""

from __future__ import annotations

import inspect
import tempfile
from pathlib import Path
from typing import Any

from ..agent.shell import ShellConfig
from ..agent.tools import ToolConfig, ToolExecutor
from ..tasks import Task
from ..workspace import create_workspace
from .chat import initial_messages

CLOSING = "Done: model_new.py calls the custom kernel."


def env_tool_schemas(backend: str) -> list[dict[str, Any]]:
    """The tool schemas TRL renders for our environment (its public methods, in TRL's order)."""
    from transformers.utils import get_json_schema

    from ..evaluation import EvalConfig
    from .trl.env import make_env_class

    env_cls = make_env_class([], backend=backend, eval_config=EvalConfig(backend=backend))
    names = [n for n, _ in inspect.getmembers(env_cls, predicate=inspect.isfunction)
             if n not in ("reset", "get_reward") and not n.startswith("_")]
    return [get_json_schema(getattr(env_cls, n)) for n in names]


def solution_episode(task: Task, files: dict[str, str], backend: str) -> dict[str, Any]:
    """One SFT row (`messages`, `tools`, `meta`) in which the assistant writes `files` and stops.
    The tool results are the real ones: the calls are executed in a fresh workspace."""
    order = sorted(files, key=lambda p: (p == "model_new.py", not p.endswith((".cu", ".cpp")) or "binding" in p, p))
    calls = [{"id": f"call_{i}", "type": "function",
              "function": {"name": "write_file", "arguments": {"path": p, "content": files[p]}}}
             for i, p in enumerate(order)]
    with tempfile.TemporaryDirectory(prefix="demo-") as tmp:
        ws = create_workspace(task, Path(tmp) / "ws", backend)
        messages = initial_messages(ws)
        # only write_file runs here, never bash: no sealed shell needed (bubblewrap may be absent)
        executor = ToolExecutor.for_workspace(ws, ToolConfig(shell=ShellConfig(seal=False)))
        try:
            results = [executor.execute("write_file", c["function"]["arguments"]) for c in calls]
        finally:
            executor.close()
    bad = [r.text for r in results if not r.ok]
    if bad:
        raise ValueError(f"{task.name}: a scripted write_file failed: {bad[0]}")
    messages.append({"role": "assistant", "content": "", "tool_calls": calls})
    messages += [{"role": "tool", "name": "write_file", "tool_call_id": c["id"], "content": r.text}
                 for c, r in zip(calls, results)]
    messages.append({"role": "assistant", "content": CLOSING})
    return {"messages": messages, "tools": env_tool_schemas(backend),
            "meta": {"episode_id": f"demo-{task.content_hash[:12]}", "task": task.name,
                     "task_hash": task.content_hash, "reward": None, "backend": backend, "policy": "scripted:solution"}}


def example_solution_rows(names: list[str], backend: str) -> list[dict[str, Any]]:
    """Rows for bundled examples (`names` as `resolve_tasks` reads them: 'examples:level=1', ...)."""
    from ..examples import list_examples
    from .models import resolve_tasks

    by_task = {e.task.name: e for e in list_examples()}
    rows = []
    for task in resolve_tasks(names):
        ex = by_task.get(task.name)
        if ex is None:
            raise ValueError(f"{task.name} is not a bundled example: only those ship solutions")
        src = ex.solution_dir(backend)
        if not src.is_dir():
            raise FileNotFoundError(f"example {ex.name} has no {backend} solution")
        files = {"model_new.py": (src / "model_new.py").read_text()}
        files.update({f"kernels/{f.name}": f.read_text() for f in sorted((src / "kernels").iterdir()) if f.is_file()})
        rows.append(solution_episode(task, files, backend))
    return rows


__all__ = ["env_tool_schemas", "solution_episode", "example_solution_rows"]
