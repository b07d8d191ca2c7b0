"""Any OpenAI-compatible chat-completions endpoint: vLLM, SGLang, llama.cpp server, Ollama,
hosted APIs. Native tool calls by default; `tool_format='text'` for models without them. A reply
with no native calls but `<tool_call>` blocks in its text is parsed too (some servers leave the
model's tool syntax in the content)."""

from __future__ import annotations

import time
import uuid
from typing import Any, Sequence

import openai

from ..tools import ToolSpec
from ..trajectory import Message, ToolCall, Usage
from .base import Policy, PolicyConfig, PolicyError, PolicyReply, TransientError, http_error, with_retries
from .text_calls import call_from_json, parse_tool_calls, to_text_messages


class OpenAIChatPolicy(Policy):
    kind = "openai"

    def __init__(self, config: PolicyConfig):
        super().__init__(config)
        if not config.model:
            raise PolicyError("the openai policy needs a model name (--model or CUDA_AGENT_MODEL)")
        self.client = openai.OpenAI(base_url=config.base_url, api_key=config.api_key() or "none",
                                    timeout=openai.Timeout(config.timeout_s, connect=config.connect_timeout_s),
                                    max_retries=0)

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> PolicyReply:
        native = self.config.tool_format == "native"
        request: dict[str, Any] = {
            "model": self.config.model, "max_tokens": self.config.max_tokens,
            "messages": [m.to_openai() for m in messages] if native else to_text_messages(messages, tools),
        }
        if native and tools:
            request["tools"] = [t.openai_schema() for t in tools]
        if self.config.temperature is not None:
            request["temperature"] = self.config.temperature
        t0 = time.monotonic()
        response, retries = with_retries(lambda: self._create(request), self.config)
        if not response.choices:
            raise PolicyError("the endpoint returned no choices")
        choice = response.choices[0]
        content = choice.message.content or ""
        calls = [_native_call(c) for c in (choice.message.tool_calls or [])]
        if not calls and "<tool_call>" in content:
            content, calls = parse_tool_calls(content)
        usage = response.usage
        return PolicyReply(content=content, tool_calls=calls, finish_reason=choice.finish_reason, retries=retries,
                           usage=Usage(prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                                       completion_tokens=getattr(usage, "completion_tokens", 0) or 0),
                           seconds=time.monotonic() - t0)

    def _create(self, request: dict[str, Any]) -> Any:
        try:
            return self.client.chat.completions.create(**request)
        except (openai.APITimeoutError, openai.APIConnectionError) as exc:
            raise TransientError(f"{type(exc).__name__}: {exc}") from exc
        except openai.APIStatusError as exc:
            raise http_error(exc.status_code, _message(exc), getattr(exc.response, "headers", None)) from exc

    def close(self) -> None:
        self.client.close()


def _native_call(call: Any) -> ToolCall:
    return call_from_json(call.id or f"call_{uuid.uuid4().hex[:12]}", call.function.name or "",
                          call.function.arguments or "{}")


def _message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
    return str(getattr(exc, "message", exc))
