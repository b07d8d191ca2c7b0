"""The opening messages of a training episode. When the agent package provides its prompt
builder, training uses it (RL must optimise the policy that is run at inference); otherwise the
workspace's own SKILL.md is the system prompt and the reference model.py is the task."""

from __future__ import annotations

from typing import Any

from ..workspace import Workspace

_INTRO = ("You are an expert CUDA engineer. Rewrite the PyTorch Model in model.py as ModelNew in model_new.py, "
          "backed by custom kernels in kernels/, so that it is correct and faster than both PyTorch eager and "
          "torch.compile. Work in the workspace with the tools; follow SKILL.md.")


def initial_messages(ws: Workspace) -> list[dict[str, Any]]:
    """[system, user] in OpenAI format for a fresh workspace."""
    try:
        from ..agent.prompts import initial_messages as agent_initial_messages  # type: ignore[import-not-found]
    except ImportError:
        agent_initial_messages = None
    if agent_initial_messages is not None:
        return [m.to_openai() if hasattr(m, "to_openai") else dict(m) for m in agent_initial_messages(ws)]
    skill = (ws.root / "SKILL.md").read_text()
    return [{"role": "system", "content": f"{_INTRO}\n\n{skill}"},
            {"role": "user", "content": f"Task {ws.task.name}. model.py:\n```python\n{ws.task.source}\n```"}]


__all__ = ["initial_messages"]
