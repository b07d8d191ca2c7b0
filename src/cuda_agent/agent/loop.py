"""The ReAct loop: one episode of a policy working on one task in a fresh workspace.

    trajectory = run_episode(task, policy, AgentConfig(backend="cpu"), "runs/ep0")

Reads top to bottom: lay out the workspace; system prompt = its SKILL.md + the task; then up to
`max_turns` times: fit the context, ask the policy, run the tool calls it made, and when it ran
verify / profile, evaluate that state ourselves and snapshot it if it is the best so far. Stop
when a reply has no tool call (the agent is done), turns run out, the context cannot be made to
fit, or the policy fails. The final reward always comes from `cuda_agent.evaluate` on the final
workspace, never from the agent's words.
"""

from __future__ import annotations

import time
import traceback
import uuid
from pathlib import Path
from typing import Callable

from pydantic import BaseModel, Field

from ..evaluation import EvalConfig, evaluate
from ..evaluation.records import EvalResult
from ..tasks import Task
from ..workspace import Workspace, create_workspace
from .context import ContextExhausted, ContextWindow
from .policies.base import ContextOverflow, Policy, PolicyError, PolicyReply
from .prompts import NUDGE_MESSAGE, initial_messages
from .shell import ShellConfig
from .snapshots import BestState, Trigger, candidate_hash, eval_trigger, improves
from .tools import TOOL_NAMES, TOOLS, ToolConfig, ToolExecutor, ToolResult
from .trajectory import (Evaluation, Message, StopReason, TaskInfo, ToolCall, ToolCallRecord, Trajectory, Turn,
                         now_iso)

class AgentConfig(BaseModel):
    """One episode's settings (recorded in the trajectory). Defaults follow the paper (SPEC §2)."""

    backend: str | None = Field(default=None, description="'cuda' or 'cpu'; None: the local device")
    max_turns: int = Field(default=200, ge=1)
    context_tokens: int = Field(default=131_072, ge=1024, description="the model's context window")
    keep_recent_turns: int = Field(default=3, ge=1, description="turns never compacted (unless nothing else fits)")
    overflow_retries: int = Field(default=3, ge=0, description="compactions per turn after 'prompt too long'")
    nudges: int = Field(default=0, ge=0, description="times to remind an agent that stops before anything was "
                        "verified (0 = stop at once, as in the paper; small models need a push)")
    evaluate_on_verify: bool = Field(default=True, description="evaluate (trusted) after the agent verifies "
                                     "or profiles, to keep the best state")
    reuse_final_evaluation: bool = Field(default=True, description="if the agent's last profile already evaluated "
                                         "the exact final state (same content hash), that record is the final one")
    bash_timeout_s: float = Field(default=300.0, gt=0)
    max_tool_output_chars: int = Field(default=30_000, ge=1000)
    eval: EvalConfig = Field(default_factory=EvalConfig, description="final and snapshot evaluations")
    isolate_network: bool = Field(default=True, description="bash without network, where the OS allows")
    restrict_writes: bool = Field(default=True, description="bash writes only inside the workspace (Landlock)")

    def tool_config(self) -> ToolConfig:
        return ToolConfig(bash_timeout_s=self.bash_timeout_s, bash_max_timeout_s=max(900.0, self.bash_timeout_s),
                          max_output_chars=self.max_tool_output_chars,
                          shell=ShellConfig(isolate_network=self.isolate_network, restrict_writes=self.restrict_writes,
                                            cache_dir=self.eval.cache_dir))


def run_episode(task: Task, policy: Policy, config: AgentConfig | None = None, workdir: str | Path = "episode", *,
                episode_id: str | None = None, sample: int = 0,
                on_turn: Callable[[Trajectory], None] | None = None,
                workspace: Workspace | None = None) -> Trajectory:
    """Run one episode of `policy` on `task` in `workdir` (workspace in `workdir/workspace`, best
    state in `workdir/best`); pass `workspace` to work in an existing one instead (its backend
    wins). Never raises for what the policy or the candidate did: failures are recorded in the
    trajectory (`stop_reason`, `error`). Stable API (used by the benchmark)."""
    cfg = config or AgentConfig()
    from ..backends import default_backend_name

    backend = workspace.backend if workspace is not None else cfg.backend or default_backend_name()
    root = Path(workdir).resolve()
    root.mkdir(parents=True, exist_ok=True)
    t_start = time.monotonic()
    traj = Trajectory(
        episode_id=episode_id or f"{_slug(task.name)}-{uuid.uuid4().hex[:8]}", sample=sample,
        task=TaskInfo(name=task.name, content_hash=task.content_hash, level=task.level, origin=task.origin),
        backend=backend, policy=policy.describe(), config=cfg.model_dump(mode="json"), tools=list(TOOL_NAMES),
        started_at=now_iso(), workdir=str(root))
    cache = Path(cfg.eval.cache_dir) if cfg.eval.cache_dir else None
    ws = workspace if workspace is not None else create_workspace(task, root / "workspace", backend, overwrite=True,
                                                                  cache_dir=cache)
    executor = ToolExecutor.for_workspace(ws, cfg.tool_config())
    traj.environment = {"tools": executor.shell.confinement}
    episode = _Episode(ws, policy, cfg, executor, traj, BestState(ws.root, root / "best"))
    try:
        traj.stop_reason, traj.error = episode.run(on_turn)
    except Exception as exc:  # a bug or an infrastructure failure: recorded, and the final evaluation still runs
        traj.stop_reason, traj.error = "error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}"
    finally:
        executor.close()
    try:
        episode.final_evaluation()
    except Exception as exc:  # the environment itself failed: no final verdict, the episode is not finished
        traj.stop_reason = "error"
        traj.error = f"{traj.error + chr(10) if traj.error else ''}final evaluation failed: {type(exc).__name__}: {exc}"
    traj.best = episode.best.best
    traj.seconds = time.monotonic() - t_start
    traj.finished_at = now_iso()
    return traj


class _Episode:
    """The state one episode carries between turns."""

    def __init__(self, ws: Workspace, policy: Policy, cfg: AgentConfig, executor: ToolExecutor, traj: Trajectory,
                 best: BestState):
        self.ws, self.policy, self.cfg, self.executor, self.traj, self.best = ws, policy, cfg, executor, traj, best
        limit = min(cfg.context_tokens, policy.context_limit or cfg.context_tokens)
        reserve = min(policy.config.max_tokens, limit // 4)
        self.window = ContextWindow(limit - reserve, tools=TOOLS, keep_recent_turns=cfg.keep_recent_turns,
                                    counter=policy.count_tokens if _has_counter(policy) else None)
        self.evaluated: dict[tuple[str, bool], EvalResult] = {}
        self.nudges_left = cfg.nudges

    def run(self, on_turn: Callable[[Trajectory], None] | None) -> tuple[StopReason, str | None]:
        for m in initial_messages(self.ws):
            self.traj.messages.append(self.window.add(m))
        for turn in range(self.cfg.max_turns):
            t0 = time.monotonic()
            record = Turn(index=turn)
            self.traj.turns.append(record)
            try:
                reply = self._ask(turn, record)
            except ContextExhausted as exc:
                return "context_exhausted", str(exc)
            except PolicyError as exc:
                return "policy_error", str(exc)
            assistant = Message(role="assistant", content=reply.content, tool_calls=reply.tool_calls, turn=turn)
            self.traj.messages.append(self.window.add(assistant))
            if not reply.tool_calls:
                record.loop_seconds = time.monotonic() - t0 - record.model_seconds
                if self.nudges_left and not self.traj.evaluations:
                    self.nudges_left -= 1
                    self.traj.messages.append(self.window.add(Message(role="user", content=NUDGE_MESSAGE, turn=turn)))
                    continue
                return "done", None
            trigger = self._run_tools(turn, reply.tool_calls, record)
            if trigger and self.cfg.evaluate_on_verify:
                t_eval = time.monotonic()
                self._evaluate(turn, trigger, self._last_command)
                record.eval_seconds = time.monotonic() - t_eval
            record.loop_seconds = max(0.0, time.monotonic() - t0 - record.model_seconds - record.tool_seconds
                                      - record.eval_seconds)
            if on_turn is not None:
                on_turn(self.traj)
        return "max_turns", None

    def _ask(self, turn: int, record: Turn) -> PolicyReply:
        """One model call; compacts before it, and again (up to the limit) if the endpoint overflows."""
        for attempt in range(self.cfg.overflow_retries + 1):
            compaction = self.window.fit(turn)
            if compaction:
                self.traj.compactions.append(compaction)
            record.context_tokens = self.window.tokens()
            try:
                reply = self.policy.complete(list(self.window.messages), TOOLS)
            except ContextOverflow:
                if attempt == self.cfg.overflow_retries:
                    raise ContextExhausted("the endpoint still refused the prompt as too long after "
                                           f"{attempt + 1} compaction(s)") from None
                self.traj.compactions.append(self.window.shrink(turn))
                continue
            record.model_seconds += reply.seconds
            record.usage = reply.usage
            record.retries += reply.retries
            record.finish_reason = reply.finish_reason
            record.tool_calls = len(reply.tool_calls)
            self.traj.usage = self.traj.usage + reply.usage
            self.window.calibrate(reply.usage.prompt_tokens, record.context_tokens)
            return reply
        raise AssertionError("unreachable")

    def _run_tools(self, turn: int, calls: list[ToolCall], record: Turn) -> Trigger | None:
        trigger: Trigger | None = None
        self._last_command = None
        for call in calls:
            result = self._execute(call)
            record.tool_seconds += result.seconds
            shown = self.window.add(Message(role="tool", content=result.text, tool_call_id=call.id, name=call.name,
                                            turn=turn))
            self.traj.messages.append(shown)
            self.traj.tool_calls.append(ToolCallRecord(
                turn=turn, call_id=call.id, name=call.name, arguments=call.arguments, ok=result.ok, error=result.error,
                seconds=result.seconds, exit_code=result.exit_code, timed_out=result.timed_out,
                truncated=result.truncated or shown.content != result.text, output_chars=len(result.text)))
            if call.name == "bash" and call.arguments and not result.timed_out:
                kind = eval_trigger(str(call.arguments.get("command", "")))
                if kind and (trigger is None or kind == "profile"):
                    trigger, self._last_command = kind, str(call.arguments.get("command"))
        return trigger

    def _execute(self, call: ToolCall) -> ToolResult:
        if call.parse_error is not None:
            return ToolResult(name=call.name or "?", ok=False,
                              error=f"{call.parse_error}; the call was not run. Send the arguments as one JSON object.")
        if not call.name:
            return ToolResult(name="?", ok=False, error=f"a tool call needs a tool name; tools are: {', '.join(TOOL_NAMES)}")
        return self.executor.execute(call.name, call.arguments)

    def _evaluate(self, turn: int | None, trigger: Trigger | str, command: str | None) -> EvalResult:
        """Evaluate the current state (trusted, in this process); record it; snapshot if best."""
        measured = trigger in ("profile", "final")
        chash = candidate_hash(self.ws.root)
        cached = self.evaluated.get((chash, True)) or (None if measured else self.evaluated.get((chash, False)))
        t0 = time.monotonic()
        if cached is not None and (trigger != "final" or self.cfg.reuse_final_evaluation):
            result = cached
        else:
            result = evaluate(self.ws, self.cfg.eval if measured else self.cfg.eval.model_copy(update={"measure": False}))
            self.evaluated[(chash, measured)] = result
        before = self.best.best.result if self.best.best else None
        improved = improves(result, before) and self.best.consider(result, turn, chash)
        self.traj.evaluations.append(Evaluation(turn=turn, trigger=trigger, command=command,  # type: ignore[arg-type]
                                                candidate_hash=chash, measured=measured, improved=improved,
                                                seconds=time.monotonic() - t0, result=result))
        return result

    def final_evaluation(self) -> None:
        t0 = time.monotonic()
        self.traj.final = self._evaluate(None, "final", None)
        if self.traj.turns:
            self.traj.turns[-1].eval_seconds += time.monotonic() - t0


def _has_counter(policy: Policy) -> bool:
    return type(policy).count_tokens is not Policy.count_tokens


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[-60:]


__all__ = ["AgentConfig", "run_episode"]
