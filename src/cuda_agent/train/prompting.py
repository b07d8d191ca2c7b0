"""The opening messages of a training episode: the agent's own prompt builder, so RL optimises the
policy that is run at inference."""

from __future__ import annotations

from typing import Any

from ..workspace import Workspace


def initial_messages(ws: Workspace) -> list[dict[str, Any]]:
    """[system, user] in OpenAI format for a fresh workspace."""
    from ..agent.prompts import initial_messages as agent_initial_messages

    return [m.to_openai() for m in agent_initial_messages(ws)]


__all__ = ["initial_messages"]
