"""The opening messages of a training episode: the agent's own prompt builder, so RL optimises the
policy that is run at inference."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from ..tasks import Task
from ..workspace import Workspace, create_workspace


def initial_messages(ws: Workspace) -> list[dict[str, Any]]:
    """[system, user] in OpenAI format for a fresh workspace."""
    from ..agent.prompts import initial_messages as agent_initial_messages

    return [m.to_openai() for m in agent_initial_messages(ws)]


def task_prompt(task: Task, backend: str) -> list[dict[str, Any]]:
    """`initial_messages` for `task`, laid out in a throwaway workspace (dataset rows)."""
    with tempfile.TemporaryDirectory(prefix="prompt-") as tmp:
        return initial_messages(create_workspace(task, Path(tmp) / "ws", backend))


__all__ = ["initial_messages", "task_prompt"]
