"""Tool calls as text, for models without native tool calling: tools described in the system
prompt, calls as `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` (Hermes / Qwen),
results as `<tool_response>` blocks. A block that is not valid JSON still becomes a call (with
`parse_error` set), so the agent is told what was wrong and goes on.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any, Sequence

from ..tools import ToolSpec
from ..trajectory import Message, ToolCall

_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
_NAME = re.compile(r'"name"\s*:\s*"([^"]+)"')


def tool_instructions(tools: Sequence[ToolSpec]) -> str:
    """The system-prompt section that teaches the text format."""
    specs = "\n".join(json.dumps({"name": t.name, "description": t.description, "parameters": t.parameters})
                      for t in tools)
    return ("# Tools\n\nYou can call these tools. Each is described by a JSON schema:\n<tools>\n"
            f"{specs}\n</tools>\n\nTo call a tool, write one block per call, anywhere in your reply:\n"
            '<tool_call>{"name": "TOOL_NAME", "arguments": {...}}</tool_call>\n'
            "Results come back in <tool_response> blocks. When you are finished, reply without any tool call.")


def parse_tool_calls(content: str) -> tuple[str, list[ToolCall]]:
    """Split a reply into its prose and its `<tool_call>` blocks."""
    calls: list[ToolCall] = []
    for match in _BLOCK.finditer(content):
        body = match.group(1).strip()
        if not body:
            continue
        calls.append(_parse_block(body))
    prose = _BLOCK.sub("", content).strip()
    return prose, calls


def _parse_block(body: str) -> ToolCall:
    call_id = f"call_{uuid.uuid4().hex[:12]}"
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1)
    try:
        obj = json.loads(body)
    except json.JSONDecodeError as exc:
        name = _NAME.search(body)
        return ToolCall(id=call_id, name=name.group(1) if name else "", raw_arguments=body,
                        parse_error=f"tool call is not valid JSON ({exc.msg} at char {exc.pos})")
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return ToolCall(id=call_id, name="", raw_arguments=body,
                        parse_error='a tool call must be a JSON object {"name": ..., "arguments": {...}}')
    args: Any = obj.get("arguments", obj.get("parameters", {}))
    return call_from_json(call_id, obj["name"], args if isinstance(args, str) else json.dumps(args))


def call_from_json(call_id: str, name: str, raw: str) -> ToolCall:
    """A call whose arguments are a JSON string (native calls; double-encoding models): one that
    is not a JSON object keeps `raw_arguments` and says why in `parse_error`."""
    try:
        args = json.loads(raw)
    except json.JSONDecodeError as exc:
        return ToolCall(id=call_id, name=name, raw_arguments=raw,
                        parse_error=f"arguments are not valid JSON ({exc.msg} at char {exc.pos})")
    if not isinstance(args, dict):
        return ToolCall(id=call_id, name=name, raw_arguments=raw, parse_error="arguments must be a JSON object")
    return ToolCall(id=call_id, name=name, arguments=args)


def render_call(call: ToolCall) -> str:
    payload = call.arguments_json() if call.arguments is not None else (call.raw_arguments or "{}")
    return f'<tool_call>{{"name": {json.dumps(call.name)}, "arguments": {payload}}}</tool_call>'


def to_text_messages(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> list[dict[str, str]]:
    """The conversation with tools as text: instructions appended to the system prompt, calls
    inside assistant content, results as user messages. Consecutive results share one message."""
    out: list[dict[str, str]] = []
    for m in messages:
        if m.role == "system":
            out.append({"role": "system", "content": f"{m.content}\n\n{tool_instructions(tools)}"})
        elif m.role == "assistant":
            parts = [m.content] if m.content else []
            parts += [render_call(c) for c in m.tool_calls]
            out.append({"role": "assistant", "content": "\n".join(parts)})
        elif m.role == "tool":
            block = f"<tool_response name={json.dumps(m.name or '')}>\n{m.content}\n</tool_response>"
            if out and out[-1]["role"] == "user" and out[-1]["content"].startswith("<tool_response"):
                out[-1]["content"] += "\n" + block
            else:
                out.append({"role": "user", "content": block})
        else:
            out.append({"role": m.role, "content": m.content})
    return out


__all__ = ["tool_instructions", "parse_tool_calls", "call_from_json", "render_call", "to_text_messages"]
