"""Trajectories: one JSONL record per episode, a versioned schema, a writer and a loader.

A `Trajectory` holds everything later stages (RFT filter, benchmark, RL adapters) read: the
conversation as the model saw it, per-turn timings and tokens, every tool call and evaluation,
the best state and the final result (always `cuda_agent.evaluate` on the final workspace). Bump
`SCHEMA_VERSION` on any incompatible change.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..evaluation.records import EvalResult
from ..storage import JsonlWriter, StoreError, read_jsonl

SCHEMA_VERSION = 1

StopReason = Literal["done", "max_turns", "context_exhausted", "time_budget", "token_budget", "cost_budget",
                     "policy_error", "error"]
FINISHED_STOPS: frozenset[str] = frozenset({"done", "max_turns", "context_exhausted", "time_budget", "token_budget",
                                            "cost_budget"})


class _Record(BaseModel):
    model_config = ConfigDict(extra="ignore")


# ---- the conversation -------------------------------------------------------------------------
class ToolCall(_Record):
    """A call the model asked for. `arguments` is None when the model's JSON did not parse;
    then `raw_arguments` holds what it sent and `parse_error` why it failed."""

    id: str
    name: str
    arguments: dict[str, Any] | None = None
    raw_arguments: str | None = None
    parse_error: str | None = None

    def arguments_json(self) -> str:
        if self.arguments is not None:
            return json.dumps(self.arguments, ensure_ascii=False)
        return self.raw_arguments or ""


class Message(_Record):
    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = Field(default=None, description="tool messages: the call answered")
    name: str | None = Field(default=None, description="tool messages: the tool's name")
    turn: int | None = Field(default=None, description="the loop turn that produced it (None: prompt)")

    def to_openai(self, *, parsed_arguments: bool = False) -> dict[str, Any]:
        """This message in the OpenAI chat-completions format; `parsed_arguments`: call arguments as
        objects, as chat templates render them for training (unparsable ones as {})."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.role == "assistant" and self.tool_calls:
            out["tool_calls"] = [{"id": c.id, "type": "function", "function": {
                "name": c.name, "arguments": (c.arguments or {}) if parsed_arguments else c.arguments_json()}}
                for c in self.tool_calls]
        if self.role == "tool":
            out["tool_call_id"] = self.tool_call_id or ""
            if self.name:
                out["name"] = self.name
        return out


class Usage(_Record):
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(prompt_tokens=self.prompt_tokens + other.prompt_tokens,
                     completion_tokens=self.completion_tokens + other.completion_tokens)


# ---- what happened, turn by turn --------------------------------------------------------------
class Turn(_Record):
    index: int
    usage: Usage = Field(default_factory=Usage)
    model_seconds: float = 0.0
    tool_seconds: float = 0.0
    eval_seconds: float = Field(default=0.0, description="trusted evaluations the loop ran after this turn")
    loop_seconds: float = Field(default=0.0, description="the loop's own work: context, records, snapshots")
    retries: int = 0
    finish_reason: str | None = None
    tool_calls: int = 0
    context_tokens: int = Field(default=0, description="estimated tokens sent to the model")


class ToolCallRecord(_Record):
    turn: int
    call_id: str
    name: str
    arguments: dict[str, Any] | None = None
    ok: bool
    error: str | None = None
    seconds: float = 0.0
    exit_code: int | None = None
    timed_out: bool = False
    truncated: bool = False
    output_chars: int = 0


class Evaluation(_Record):
    """One run of the environment during the episode. `trigger`: the agent ran verify /
    profile (the loop then evaluated the same state itself: the record never comes from the
    agent's output), or the loop's own final evaluation."""

    turn: int | None
    trigger: Literal["verify", "profile", "final"]
    command: str | None = None
    candidate_hash: str
    measured: bool
    improved: bool = False
    seconds: float = 0.0
    result: EvalResult


class Snapshot(_Record):
    """The best state seen: a copy of `kernels/` + `model_new.py` and the evaluation that scored it."""

    turn: int | None
    candidate_hash: str
    path: str = Field(description="folder holding the copy (model_new.py, kernels/)")
    files: list[str]
    result: EvalResult


class FileDiff(_Record):
    """How one of the agent's files changed during a turn (unified diff; '' for a binary file)."""

    turn: int
    path: str
    status: Literal["added", "modified", "deleted"]
    diff: str = ""
    added: int = 0
    removed: int = 0


class Compaction(_Record):
    turn: int
    tokens_before: int
    tokens_after: int
    outputs_shortened: int = 0
    turns_dropped: int = 0
    reason: Literal["budget", "overflow"] = "budget"


class TaskInfo(_Record):
    name: str
    content_hash: str
    level: int | None = None
    origin: str = ""


class Trajectory(_Record):
    """One episode. `final` is the environment's verdict on the final workspace."""

    schema_version: int = SCHEMA_VERSION
    episode_id: str
    sample: int = 0
    task: TaskInfo
    backend: str
    policy: dict[str, Any] = Field(default_factory=dict, description="kind, model, endpoint (never a key)")
    config: dict[str, Any] = Field(default_factory=dict)
    tools: list[str] = Field(default_factory=list)
    started_at: str = ""
    finished_at: str = ""
    messages: list[Message] = Field(default_factory=list)
    turns: list[Turn] = Field(default_factory=list)
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    evaluations: list[Evaluation] = Field(default_factory=list)
    compactions: list[Compaction] = Field(default_factory=list)
    final: EvalResult | None = None
    best: Snapshot | None = None
    best_final: EvalResult | None = Field(default=None, description="a full evaluation of the best state, run when "
                                          "the final state is broken (what the episode delivers)")
    diffs: list[FileDiff] = Field(default_factory=list, description="changes to model_new.py and kernels/, per turn")
    stop_reason: StopReason = "error"
    error: str | None = None
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float | None = Field(default=None, description="from the price table; None: the model has no price")
    seconds: float = 0.0
    workdir: str = ""
    environment: dict[str, Any] = Field(default_factory=dict, description="tool confinement in force, device")

    @property
    def final_reward(self) -> int:
        return self.final.reward if self.final is not None else -1

    @property
    def delivered(self) -> EvalResult | None:
        """The result of what the episode leaves behind: the final state, or the best state
        when the final one is broken and the best one was re-evaluated in full."""
        if self.best_final is not None and (self.final is None or self.final.reward < 1):
            return self.best_final
        return self.final

    @property
    def best_reward(self) -> int:
        return max(self.final_reward, self.best.result.reward if self.best else -1)

    @property
    def finished(self) -> bool:
        """Finished episodes are skipped on resume; policy or infrastructure errors are retried."""
        return self.stop_reason in FINISHED_STOPS and self.final is not None

    def openai_messages(self) -> list[dict[str, Any]]:
        return [m.to_openai() for m in self.messages]

    def summary(self) -> dict[str, Any]:
        """A flat, printable digest (what docs and progress lines show)."""
        f = self.final
        return {"episode": self.episode_id, "task": self.task.name, "stop": self.stop_reason,
                "turns": len(self.turns), "tool_calls": len(self.tool_calls),
                "tool_errors": sum(not c.ok for c in self.tool_calls), "evaluations": len(self.evaluations),
                "final_reward": self.final_reward, "best_reward": self.best_reward,
                "speedup_vs_eager": f.speedup_vs_eager if f else None,
                "speedup_vs_compile": f.speedup_vs_compile if f else None,
                "delivered_reward": self.delivered.reward if self.delivered else -1,
                "prompt_tokens": self.usage.prompt_tokens, "completion_tokens": self.usage.completion_tokens,
                "cost_usd": self.cost_usd, "seconds": round(self.seconds, 1), "error": self.error}


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# ---- files ------------------------------------------------------------------------------------
class TrajectoryError(ValueError):
    """A trajectory file line that cannot be used, with the file and line number."""


TrajectoryWriter = JsonlWriter
"""Appends one JSON line per episode (`cuda_agent.storage`: fsynced, one writer per file)."""


def iter_trajectories(path: str | Path, *, strict: bool = True) -> Iterator[Trajectory]:
    """The file's trajectories in order. A torn final line is skipped and a damaged line raises
    (`cuda_agent.storage`); a record this version cannot read raises TrajectoryError naming it,
    or is skipped when strict=False."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no trajectory file at {path}")
    try:
        records = read_jsonl(path)
    except StoreError as exc:
        raise TrajectoryError(str(exc)) from None
    for n, raw in enumerate(records, start=1):
        try:
            version = raw.get("schema_version")
            if not isinstance(version, int) or version > SCHEMA_VERSION:
                raise TrajectoryError(f"{path}:{n}: schema_version {version!r} is not readable by this version "
                                      f"(reads <= {SCHEMA_VERSION})")
            yield Trajectory.model_validate(raw)
        except (ValidationError, TrajectoryError) as exc:
            if strict:
                if isinstance(exc, TrajectoryError):
                    raise
                raise TrajectoryError(f"{path}:{n}: not a valid trajectory: {str(exc)[:300]}") from None


def load_trajectories(path: str | Path, *, strict: bool = True) -> list[Trajectory]:
    return list(iter_trajectories(path, strict=strict))


def latest_by_episode(trajectories: list[Trajectory]) -> dict[str, Trajectory]:
    """The last record of each episode id (a retried episode appends a newer record)."""
    return {t.episode_id: t for t in trajectories}


__all__ = ["SCHEMA_VERSION", "StopReason", "ToolCall", "Message", "Usage", "Turn", "ToolCallRecord", "Evaluation",
           "Snapshot", "FileDiff", "Compaction", "TaskInfo", "Trajectory", "TrajectoryWriter", "TrajectoryError",
           "iter_trajectories", "load_trajectories", "latest_by_episode", "now_iso"]
