"""The context budget: what the model is shown, kept under a token budget.

The trajectory keeps the whole conversation; the model sees a view of it. New tool outputs are
capped as they enter; when the view outgrows the budget, old long outputs and written contents
are cut to head and tail, then the oldest turns are dropped whole (tool-call pairing stays
valid). Compacting in place keeps the prefix stable, so prompt caches stay warm.
"""

from __future__ import annotations

import json
from typing import Callable, Sequence

from .tools import ToolSpec, cap_text
from .trajectory import Compaction, Message, ToolCall

CHARS_PER_TOKEN = 3.5
MESSAGE_OVERHEAD_TOKENS = 6
SHORT_CHARS = 600  # what an old output keeps (head + tail)


class ContextExhausted(RuntimeError):
    """Even the system prompt, the task and the latest turn do not fit the budget."""


class ContextWindow:
    """The view sent to the model, with its budget. `add` new messages; call `fit` before each
    model call; `shrink` after the endpoint said the prompt was too long."""

    def __init__(self, budget_tokens: int, *, tools: Sequence[ToolSpec] = (), keep_recent_turns: int = 3,
                 counter: Callable[[str], int | None] | None = None):
        if budget_tokens < 512:
            raise ValueError(f"context budget of {budget_tokens} tokens is too small (need >= 512)")
        self.budget = budget_tokens
        self.keep_recent = max(1, keep_recent_turns)
        self.counter = counter
        self.scale = 1.0  # measured tokens / estimated tokens, from reported usage
        self.messages: list[Message] = []
        self._counts: dict[str, int] = {}  # text -> tokens: a tokenizer is not re-run on old messages
        self.tool_tokens = self._raw_count(json.dumps([t.openai_schema() for t in tools])) if tools else 0
        self.dropped_turns = 0

    # ---- counting -------------------------------------------------------------------------
    def _raw_count(self, text: str) -> int:
        if self.counter is None:
            return int(len(text) / CHARS_PER_TOKEN) + 1
        if text not in self._counts:
            exact = self.counter(text)
            self._counts[text] = exact if exact is not None else int(len(text) / CHARS_PER_TOKEN) + 1
        return self._counts[text]

    def _message_tokens(self, m: Message) -> int:
        text = m.content + "".join(c.name + c.arguments_json() for c in m.tool_calls)
        return self._raw_count(text) + MESSAGE_OVERHEAD_TOKENS

    def tokens(self) -> int:
        raw = sum(self._message_tokens(m) for m in self.messages) + self.tool_tokens
        return int(raw * (self.scale if self.counter is None else 1.0))

    def calibrate(self, reported_prompt_tokens: int, estimated: int) -> None:
        """Learn the real tokens-per-estimate ratio from the endpoint's usage report."""
        if reported_prompt_tokens > 0 and estimated > 0 and self.counter is None:
            raw = estimated / self.scale
            self.scale = min(3.0, max(0.5, reported_prompt_tokens / raw))

    # ---- building -------------------------------------------------------------------------
    def add(self, message: Message) -> Message:
        """Append to the view; a tool output is capped to a quarter of the budget first.
        Returns the message as the model will see it (what the trajectory records)."""
        if message.role == "tool":
            limit = max(1000, int(self.budget * CHARS_PER_TOKEN / 4))
            text, cut = cap_text(message.content, limit)
            if cut:
                message = message.model_copy(update={"content": text})
        self.messages.append(message)
        return message

    def fit(self, turn: int, reason: str = "budget") -> Compaction | None:
        """Compact until the view fits; None if it already did. Raises ContextExhausted."""
        before = self.tokens()
        if before <= self.budget:
            return None
        shortened = self._shorten(keep_recent=self.keep_recent)
        dropped = 0
        while self.tokens() > self.budget and self._drop_oldest_turn():
            dropped += 1
        if self.tokens() > self.budget:
            shortened += self._shorten(keep_recent=0)
        if self.tokens() > self.budget:
            raise ContextExhausted(f"the prompt needs ~{self.tokens()} tokens even after compaction; "
                                   f"the budget is {self.budget}")
        return Compaction(turn=turn, tokens_before=before, tokens_after=self.tokens(), outputs_shortened=shortened,
                          turns_dropped=dropped, reason=reason)  # type: ignore[arg-type]

    def shrink(self, turn: int) -> Compaction:
        """The endpoint refused the prompt as too long: lower the budget to 70% of what was sent."""
        self.budget = max(512, int(min(self.budget, self.tokens()) * 0.7))
        return self.fit(turn, reason="overflow") or Compaction(turn=turn, tokens_before=self.tokens(),
                                                               tokens_after=self.tokens(), reason="overflow")

    # ---- compaction steps -----------------------------------------------------------------
    def _groups(self) -> list[tuple[int, int]]:
        """(start, end) index ranges of turns: an assistant message and the tool results after it."""
        groups: list[tuple[int, int]] = []
        for i, m in enumerate(self.messages):
            if m.role == "assistant":
                groups.append((i, i + 1))
            elif groups and m.role == "tool" and groups[-1][1] == i:
                groups[-1] = (groups[-1][0], i + 1)
        return groups

    def _shorten(self, keep_recent: int) -> int:
        groups = self._groups()
        old = groups[:-keep_recent] if keep_recent else groups
        n = 0
        for start, end in old:
            for i in range(start, end):
                m = self.messages[i]
                new = _shortened(m)
                if new is not None:
                    self.messages[i] = new
                    n += 1
        return n

    def _drop_oldest_turn(self) -> bool:
        groups = self._groups()
        if len(groups) <= 1:
            return False
        start, end = groups[0]
        del self.messages[start:end]
        self.dropped_turns += 1
        self._note_dropped()
        return True

    def _note_dropped(self) -> None:
        """Say on the task message (the first user message) how many turns are gone."""
        for i, m in enumerate(self.messages):
            if m.role == "user":
                base = m.content.split("\n\n[context note:")[0]
                note = (f"\n\n[context note: the {self.dropped_turns} oldest turn(s) were removed to fit the context "
                        "window; the files in the workspace hold their results]")
                self.messages[i] = m.model_copy(update={"content": base + note})
                return


def _shortened(m: Message) -> Message | None:
    """A compacted copy of an old message, or None if it is short already."""
    if m.role == "tool" and len(m.content) > SHORT_CHARS + 100:
        head, tail = m.content[: SHORT_CHARS // 2], m.content[-SHORT_CHARS // 2:]
        text = f"{head}\n[... old output compacted: {len(m.content) - SHORT_CHARS} characters cut ...]\n{tail}"
        return m.model_copy(update={"content": text})
    if m.role == "assistant":
        changed = False
        content = m.content
        if len(content) > 4 * SHORT_CHARS:
            content, changed = content[: 2 * SHORT_CHARS] + "\n[... old reasoning compacted ...]", True
        calls: list[ToolCall] = []
        for c in m.tool_calls:
            args = dict(c.arguments) if c.arguments is not None else None
            for key in ("content", "new_string", "old_string"):
                value = args.get(key) if args else None
                if args is not None and isinstance(value, str) and len(value) > SHORT_CHARS:
                    args[key] = f"[{len(value)} characters, compacted; read the file for its current text]"
                    changed = True
            if args is not None and "edits" in args and len(json.dumps(args["edits"])) > SHORT_CHARS:
                args["edits"] = f"[{len(args['edits'])} edit(s), compacted]"
                changed = True
            raw = c.raw_arguments
            if raw and len(raw) > SHORT_CHARS:
                raw, changed = raw[:SHORT_CHARS] + "...", True
            calls.append(c.model_copy(update={"arguments": args, "raw_arguments": raw}))
        return m.model_copy(update={"content": content, "tool_calls": calls}) if changed else None
    return None


__all__ = ["ContextWindow", "ContextExhausted", "CHARS_PER_TOKEN"]
