"""Anthropic's Messages API with native tool use (`tool_use` / `tool_result` blocks)."""

from __future__ import annotations

import time
from typing import Any, Sequence

import anthropic

from ..tools import ToolSpec
from ..trajectory import Message, ToolCall, Usage
from .base import Policy, PolicyConfig, PolicyError, PolicyReply, TransientError, http_error, with_retries
from .text_calls import parse_tool_calls, to_text_messages


class AnthropicPolicy(Policy):
    kind = "anthropic"

    def __init__(self, config: PolicyConfig):
        super().__init__(config)
        if not config.model:
            raise PolicyError("the anthropic policy needs a model name (--model or CUDA_AGENT_MODEL)")
        self.client = anthropic.Anthropic(api_key=config.api_key(), base_url=config.base_url,
                                          timeout=anthropic.Timeout(config.timeout_s, connect=config.connect_timeout_s),
                                          max_retries=0)

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> PolicyReply:
        native = self.config.tool_format == "native"
        if native:
            system, convo = to_anthropic(messages)
        else:
            text = to_text_messages(messages, tools)
            system = "\n\n".join(m["content"] for m in text if m["role"] == "system")
            convo = [m for m in text if m["role"] != "system"]
        request: dict[str, Any] = {"model": self.config.model, "max_tokens": self.config.max_tokens,
                                   "system": system, "messages": convo}
        if native and tools:
            request["tools"] = [t.anthropic_schema() for t in tools]
        if self.config.temperature is not None:
            request["temperature"] = self.config.temperature
        t0 = time.monotonic()
        response, retries = with_retries(lambda: self._create(request), self.config)
        texts, calls = [], []
        for block in response.content:
            if block.type == "text":
                texts.append(block.text)
            elif block.type == "tool_use":
                args = block.input if isinstance(block.input, dict) else None
                calls.append(ToolCall(id=block.id, name=block.name, arguments=args,
                                      raw_arguments=None if args is not None else str(block.input),
                                      parse_error=None if args is not None else "input must be an object"))
        content = "\n".join(texts)
        if not calls and "<tool_call>" in content:
            content, calls = parse_tool_calls(content)
        return PolicyReply(content=content, tool_calls=calls, finish_reason=response.stop_reason, retries=retries,
                           usage=Usage(prompt_tokens=response.usage.input_tokens,
                                       completion_tokens=response.usage.output_tokens),
                           seconds=time.monotonic() - t0)

    def _create(self, request: dict[str, Any]) -> Any:
        try:
            return self.client.messages.create(**request)
        except (anthropic.APITimeoutError, anthropic.APIConnectionError) as exc:
            raise TransientError(f"{type(exc).__name__}: {exc}") from exc
        except anthropic.APIStatusError as exc:
            raise http_error(exc.status_code, str(getattr(exc, "message", exc)),
                             getattr(exc.response, "headers", None)) from exc

    def close(self) -> None:
        self.client.close()


def to_anthropic(messages: Sequence[Message]) -> tuple[str, list[dict[str, Any]]]:
    """(system, messages) in the Messages API shape; tool results ride in user turns."""
    system = "\n\n".join(m.content for m in messages if m.role == "system")
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            continue
        if m.role == "assistant":
            blocks: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
            blocks += [{"type": "tool_use", "id": c.id, "name": c.name or "invalid",
                        "input": c.arguments if c.arguments is not None else {}} for c in m.tool_calls]
            out.append({"role": "assistant", "content": blocks or [{"type": "text", "text": "(no reply)"}]})
        elif m.role == "tool":
            block = {"type": "tool_result", "tool_use_id": m.tool_call_id or "", "content": m.content or "(empty)"}
            if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list) \
                    and out[-1]["content"] and out[-1]["content"][0].get("type") == "tool_result":
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
        else:
            out.append({"role": "user", "content": m.content})
    return system, out
