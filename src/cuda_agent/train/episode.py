"""One multi-turn RL episode at the token level, engine-neutral: an engine's agent loop gives `TokenEpisode`
its `TokenServer` and an `Evaluator` (verl's: `verl/loop.py`). `server.generate` produces the
assistant's tokens; their tool calls run in the agent's `Environment`; tool results are appended
with mask 0 and log-prob 0 (never trained on); the final workspace's milestone reward is the
episode's. Tokenisation goes through two hooks, `_initial_tokens` and `_append_tool_results`,
which an engine's subclass may route through its own builder; the default is the HF chat template.
"""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..agent.environment import Environment
from ..agent.limits import TRAIN_MAX_TURNS
from ..agent.policies.text_calls import parse_tool_calls
from ..agent.tools import ToolConfig, tool_schemas
from ..agent.trajectory import Message, ToolCall
from ..evaluation import EvalResult
from ..tasks import Task
from .chat import initial_messages, token_ids, tool_suffix_ids
from .evaluator import Evaluator
from .metrics import verdict


class TokenServer(Protocol):
    """The policy server's contract, verl's `server_manager.generate` (a result with `.token_ids`, `.log_probs`)."""

    async def generate(self, *, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any],
                       **kwargs: Any) -> Any: ...


@dataclass(kw_only=True)
class EpisodeConfig:
    backend: str | None = None  # None: the local device
    max_turns: int = TRAIN_MAX_TURNS
    response_length: int = 131_072 - 8_192
    workdir: str | None = None  # where episodes' temporary workspaces go (default: the system's temp folder)
    keep_workspace: bool = False
    tool_config: ToolConfig = field(default_factory=ToolConfig)


@dataclass
class EpisodeOutput:
    """What an engine's rollout needs (verl's AgentLoopOutput), plus the environment's verdict and counters."""

    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    response_logprobs: list[float] | None
    reward: float
    result: EvalResult
    num_turns: int
    messages: list[dict[str, Any]]
    stop_reason: str
    tool_calls: int = 0
    tool_errors: int = 0
    seconds: dict[str, float] = field(default_factory=dict)

    def stats(self) -> dict[str, Any]:
        return {**verdict(self.result, self.tool_calls, self.tool_errors), "reward": self.reward,
                "turns": self.num_turns, "stop_reason": self.stop_reason, "response_tokens": len(self.response_ids),
                "model_tokens": sum(self.response_mask), **{f"seconds_{k}": v for k, v in self.seconds.items()}}


class TokenEpisode:
    """Runs one task to a reward. Subclass and override the token hooks to change how
    conversation messages become tokens (the verl adapter does)."""

    def __init__(self, server: TokenServer, tokenizer: Any, evaluator: Evaluator, config: EpisodeConfig):
        self.server = server
        self.tokenizer = tokenizer
        self.evaluator = evaluator
        self.config = config
        self.tools = tool_schemas("openai")

    # ---- token hooks (Hugging Face chat template by default) ---------------------------------
    async def _initial_tokens(self, messages: list[dict[str, Any]]) -> list[int]:
        return token_ids(self.tokenizer.apply_chat_template(messages, tools=self.tools, add_generation_prompt=True,
                                                            tokenize=True))

    async def _append_tool_results(self, previous_messages: list[dict[str, Any]], messages: list[dict[str, Any]],
                                   prompt_ids: list[int], response: list[int], mask: list[int],
                                   logprobs: list[float]) -> tuple[list[int], list[int], list[float]]:
        """`messages` = `previous_messages` + the tool messages. Returns the response tokens, mask and
        log-probs after appending them (tool tokens: mask 0, log-prob 0)."""
        suffix = tool_suffix_ids(self.tokenizer, messages[len(previous_messages):])
        return response + suffix, mask + [0] * len(suffix), logprobs + [0.0] * len(suffix)

    async def _parse(self, token_ids: list[int]) -> tuple[str, list[ToolCall]]:
        text = self.tokenizer.decode(token_ids, skip_special_tokens=True)
        return parse_tool_calls(text)

    async def _evaluate(self, ws: Any, _config: Any) -> Any:
        return await self.evaluator.evaluate(ws)

    # ---- the loop ---------------------------------------------------------------------------
    async def run(self, task: Task, sampling_params: dict[str, Any], request_id: str | None = None) -> EpisodeOutput:
        cfg = self.config
        request_id = request_id or uuid.uuid4().hex
        env = await asyncio.get_running_loop().run_in_executor(None, functools.partial(
            Environment.fresh, task, cfg.backend, workdir=cfg.workdir, prefix=f"ep-{request_id[:8]}-",
            keep=cfg.keep_workspace, tool_config=cfg.tool_config,
            evaluator=self._evaluate))
        with env:
            return await self._rollout(env, sampling_params, request_id)

    async def _rollout(self, env: Environment, sampling_params: dict[str, Any], request_id: str) -> EpisodeOutput:
        cfg = self.config
        timings = {"generate": 0.0, "tools": 0.0, "evaluate": 0.0}
        messages = initial_messages(env.ws)
        prompt_ids = await self._initial_tokens(messages)
        response: list[int] = []
        mask: list[int] = []
        logprobs: list[float] = []
        turns = 0
        stop = "max_turns"
        while turns < cfg.max_turns:
            t0 = time.monotonic()
            out = await self.server.generate(request_id=request_id, prompt_ids=prompt_ids + response,
                                             sampling_params=sampling_params)
            timings["generate"] += time.monotonic() - t0
            turns += 1
            gen = list(out.token_ids)
            response += gen
            mask += [1] * len(gen)
            lp = getattr(out, "log_probs", None)
            logprobs += list(lp) if lp else [0.0] * len(gen)
            if len(response) >= cfg.response_length:
                stop = "context_exhausted"
                break
            content, calls = await self._parse(gen)
            messages.append(Message(role="assistant", content=content, tool_calls=calls).to_openai(
                parsed_arguments=True))
            if not calls:
                stop = "done"
                break
            t0 = time.monotonic()
            tool_messages = [{"role": "tool", "name": call.name, "tool_call_id": call.id,
                              "content": (await env.aexecute(call)).text} for call in calls]
            timings["tools"] += time.monotonic() - t0
            previous = list(messages)
            messages.extend(tool_messages)
            new_response, new_mask, new_logprobs = await self._append_tool_results(
                previous, messages, prompt_ids, response, mask, logprobs)
            if len(new_response) >= cfg.response_length:
                stop = "context_exhausted"
                break
            response, mask, logprobs = new_response, new_mask, new_logprobs
        t0 = time.monotonic()
        result = await env.aevaluate()
        timings["evaluate"] = time.monotonic() - t0
        n = cfg.response_length
        return EpisodeOutput(prompt_ids=prompt_ids, response_ids=response[:n], response_mask=mask[:n],
                             response_logprobs=logprobs[:n], reward=float(result.reward), result=result,
                             num_turns=turns, messages=messages, stop_reason=stop, tool_calls=env.calls,
                             tool_errors=env.errors, seconds=timings)


__all__ = ["TokenServer", "EpisodeConfig", "EpisodeOutput", "TokenEpisode"]
