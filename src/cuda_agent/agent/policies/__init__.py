"""Policies: one small interface, one module per provider, SDKs imported only when used."""

from .base import (ContextOverflow, Policy, PolicyConfig, PolicyError, PolicyReply, TransientError, make_policy,
                   register_policy, with_retries)
from .scripted import ScriptedPolicy, reply
from .text_calls import parse_tool_calls, tool_instructions, to_text_messages

__all__ = ["Policy", "PolicyConfig", "PolicyReply", "PolicyError", "ContextOverflow", "TransientError",
           "make_policy", "register_policy", "with_retries", "ScriptedPolicy", "reply", "parse_tool_calls",
           "tool_instructions", "to_text_messages"]
