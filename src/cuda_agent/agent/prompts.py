"""The opening messages of an episode, in one place: the loop and the RL adapters (which must
train the policy that runs at inference) build the same prompt. System prompt = the workspace's
SKILL.md + the task (SPEC §2); one user message starts the work."""

from __future__ import annotations

from ..workspace import Workspace
from .trajectory import Message

START_MESSAGE = ("Begin. Your current directory is the workspace described above. Use the tools to read the "
                 "files, write kernels/ and model_new.py, and run ./compile.sh, ./verify.sh and ./profile.sh. "
                 "When you are finished, reply without calling any tool.")
NUDGE_MESSAGE = ("You stopped without calling a tool, but the kernel has not been verified yet. Call a tool: "
                 "write kernels/ and model_new.py, then run ./verify.sh. Reply without a tool call only when done.")


def system_prompt(ws: Workspace) -> str:
    skill = (ws.root / "SKILL.md").read_text()
    return f"{skill}\n\n# Your task: model.py\n\n```python\n{ws.task.source.rstrip()}\n```\n"


def initial_messages(ws: Workspace) -> list[Message]:
    """[system, user] for a fresh workspace (`Message.to_openai()` gives chat-completions dicts)."""
    return [Message(role="system", content=system_prompt(ws)), Message(role="user", content=START_MESSAGE)]


__all__ = ["START_MESSAGE", "NUDGE_MESSAGE", "system_prompt", "initial_messages"]
