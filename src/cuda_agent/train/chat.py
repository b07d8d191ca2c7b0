"""The conversation as every trainer renders it, exactly as inference does: its opening messages (the
agent's own prompt builder, so RL optimises the policy run at inference) and the chat template.
ChatML + `<tool_call>` JSON (hermes / Qwen2.5) is the format for every ChatML model, as TRL and verl
both parse and mask it; a tokenizer whose own template cannot render tool calls (SmolLM2's) gets this one.
"""

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


def ensure_tool_template(tokenizer) -> bool:
    """Give `tokenizer` the tool-calling ChatML template unless its own renders tool calls.
    Returns True when the template was replaced."""
    from trl.chat_template_utils import supports_tool_calling

    from .tiny import tool_chat_template

    if tokenizer.chat_template and supports_tool_calling(tokenizer):
        return False
    tokenizer.chat_template = tool_chat_template()
    return True


def tokenize_conversation(tokenizer, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                          *, max_length: int | None = None) -> dict[str, list[int]]:
    """`input_ids` and `assistant_masks` (1 on tokens the assistant wrote, incl. its end token)
    for one SFT row, rendered with the training variant of the template (generation markers)."""
    from trl.chat_template_utils import get_training_chat_template, has_generation_markers

    template = tokenizer.chat_template
    if not has_generation_markers(template):
        template = get_training_chat_template(tokenizer)
    out = tokenizer.apply_chat_template(messages, tools=tools, chat_template=template, tokenize=True,
                                        return_dict=True, return_assistant_tokens_mask=True)
    full_mask = list(out["assistant_masks"])
    ids, mask = list(out["input_ids"])[:max_length], full_mask[:max_length]
    if 1 not in full_mask:
        raise NothingToLearn("conversation has no assistant tokens to learn from", total=len(full_mask))
    if 1 not in mask:
        raise NothingToLearn(f"truncation to max_length={max_length} leaves no assistant tokens (the first is at "
                             f"position {full_mask.index(1)} of {len(full_mask)})", total=len(full_mask),
                             first=full_mask.index(1))
    return {"input_ids": ids, "assistant_masks": mask}


class NothingToLearn(ValueError):
    """A conversation whose loss mask is empty: no assistant turn, or none within `max_length`."""

    def __init__(self, message: str, *, total: int, first: int | None = None):
        super().__init__(message)
        self.total, self.first = total, first


def tool_suffix_ids(tokenizer, tool_messages: list[dict[str, Any]]) -> list[int]:
    """Tokens the template puts after an assistant turn that ended in EOS: the tool results and
    the next generation prompt. Computed on a minimal conversation (as TRL does) so that the
    assistant's own generated tokens are never re-tokenised."""
    calls = [{"type": "function", "function": {"name": tool_messages[0].get("name", "tool"), "arguments": {}}}]
    dummy = [{"role": "user", "content": "dummy"}, {"role": "assistant", "content": "", "tool_calls": calls}]
    prefix = token_ids(tokenizer.apply_chat_template(dummy, add_generation_prompt=False, tokenize=True))
    full = token_ids(tokenizer.apply_chat_template(dummy + tool_messages, add_generation_prompt=True, tokenize=True))
    if full[: len(prefix)] != prefix:
        raise ValueError("chat template is not prefix-preserving; tool results cannot be appended as tokens")
    eos = tokenizer.eos_token_id
    cut = len(prefix)
    eos_at = [i for i, t in enumerate(prefix) if t == eos]
    if eos_at:
        cut = eos_at[-1] + 1  # generation stops at EOS; what the template adds after it belongs to the suffix
    return full[cut:]


def token_ids(out: Any) -> list[int]:
    """The ids `apply_chat_template(tokenize=True)` returned: a list, or a mapping holding them."""
    return list(out["input_ids"] if hasattr(out, "keys") else out)


__all__ = ["initial_messages", "task_prompt", "ensure_tool_template", "tokenize_conversation", "NothingToLearn",
           "tool_suffix_ids", "token_ids"]
