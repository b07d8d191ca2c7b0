"""The opening messages of an episode, in one place: the loop and the RL adapters (which must
train the policy that runs at inference) build the same prompt. System prompt = the workspace's
SKILL.md + the task (SPEC §2); one user message starts the work. Users can replace the system
prompt with a template file (`string.Template`: `$skill`, `$task`, `$backend`, `$task_name`;
`$$` for a dollar sign) without touching code."""

from __future__ import annotations

import string
from pathlib import Path

from ..workspace import Workspace
from .trajectory import Message

START_MESSAGE = ("Begin. Your current directory is the workspace described above. Use the tools to read the "
                 "files, write kernels/ and model_new.py, and run ./compile.sh, ./verify.sh and ./profile.sh. "
                 "When you are finished, reply without calling any tool.")
NUDGE_MESSAGE = ("You stopped without calling a tool, but the kernel has not been verified yet. Call a tool: "
                 "write kernels/ and model_new.py, then run ./verify.sh. Reply without a tool call only when done.")


DEFAULT_TEMPLATE = "$skill\n\n# Your task: model.py\n\n```python\n$task\n```\n"


def load_template(path: str | Path) -> str:
    """A system-prompt template from a file, checked now (a typo fails before any turn runs)."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ValueError(f"cannot read system prompt template {path}: {exc.strerror}") from None
    try:
        string.Template(text).substitute(skill="", task="", backend="", task_name="")
    except (KeyError, ValueError) as exc:
        raise ValueError(f"system prompt template {path}: unknown or bad placeholder {exc} (use $skill, $task, "
                         "$backend, $task_name; $$ for a dollar sign)") from None
    return text


def system_prompt(ws: Workspace, template: str | None = None) -> str:
    skill = (ws.root / "SKILL.md").read_text()
    return string.Template(template or DEFAULT_TEMPLATE).substitute(
        skill=skill, task=ws.task.source.rstrip(), backend=ws.backend, task_name=ws.task.name)


def initial_messages(ws: Workspace, template: str | None = None) -> list[Message]:
    """[system, user] for a fresh workspace (`Message.to_openai()` gives chat-completions dicts)."""
    return [Message(role="system", content=system_prompt(ws, template)), Message(role="user", content=START_MESSAGE)]


__all__ = ["START_MESSAGE", "NUDGE_MESSAGE", "DEFAULT_TEMPLATE", "load_template", "system_prompt", "initial_messages"]
