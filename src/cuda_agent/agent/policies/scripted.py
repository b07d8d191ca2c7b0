"""A scripted policy: replays fixed replies. For tests, benchmarks of the loop itself, and
replaying a recorded run. Each step is a `PolicyReply` or a function of the conversation so far
(to react to tool results); after the last step it answers with a plain "done" message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Sequence, Union

from ..tools import ToolSpec
from ..trajectory import Message, ToolCall
from .base import Policy, PolicyConfig, PolicyError, PolicyReply

Step = Union[PolicyReply, Callable[[Sequence[Message]], PolicyReply]]


class ScriptedPolicy(Policy):
    kind = "scripted"

    def __init__(self, config: PolicyConfig | None = None, steps: Sequence[Step] | None = None):
        super().__init__(config or PolicyConfig(kind="scripted"))
        if steps is None:
            if not self.config.script:
                raise PolicyError("the scripted policy needs steps, or a JSON file of replies (--script)")
            steps = load_script(self.config.script)
        self.steps = list(steps)
        self.calls = 0

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> PolicyReply:
        i, self.calls = self.calls, self.calls + 1
        if i >= len(self.steps):
            return PolicyReply(content="done", finish_reason="stop")
        step = self.steps[i]
        reply = step(messages) if callable(step) else step
        return reply.model_copy(deep=True)


def reply(content: str = "", *calls: tuple[str, dict]) -> PolicyReply:
    """A reply making `calls` ((name, arguments) pairs), ids numbered in order."""
    return PolicyReply(content=content, tool_calls=[ToolCall(id=f"call_{i}", name=n, arguments=a)
                                                    for i, (n, a) in enumerate(calls)])


def load_script(path: str | Path) -> list[Step]:
    """A JSON list of {"content": str, "tool_calls": [{"name": ..., "arguments": {...}}]}."""
    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise PolicyError(f"cannot read script {path}: {exc}") from None
    if not isinstance(raw, list):
        raise PolicyError(f"{path}: a script is a JSON list of replies")
    return [reply(r.get("content", ""), *((c["name"], c.get("arguments", {})) for c in r.get("tool_calls", [])))
            for r in raw]
