"""The ReAct loop: one episode of a policy working on one task in a fresh workspace.

Up to `max_turns` times: fit the context, ask the policy, run its tool calls, and when it ran
verify / profile, evaluate that state ourselves and snapshot it if it is the best so far. It
stops when a reply has no tool call, turns or a budget run out, the context cannot fit or the
policy fails. Every turn is journaled as it happens, so a killed episode resumes mid-way. The
final reward always comes from `cuda_agent.evaluate`, never from the agent's words.
"""

from __future__ import annotations

import difflib
import os
import time
import traceback
import uuid
from pathlib import Path
from typing import Callable

from pydantic import BaseModel, Field

from ..evaluation import EvalConfig
from ..evaluation.records import EvalResult
from ..isolation.processes import remove_tree
from ..storage import StoreError
from ..tasks import Task
from ..workspace import Workspace, create_workspace, open_workspace
from .context import ContextExhausted, ContextWindow
from .environment import Environment
from .journal import JOURNAL, Journal, load_journal
from .policies.base import ContextOverflow, Policy, PolicyError, PolicyReply
from .prices import Price, load_table, price_for
from .prompts import NUDGE_MESSAGE, initial_messages, load_template
from .shell import ShellConfig, seal_by_default
from .snapshots import BestState, Trigger, candidate_files, candidate_hash, eval_trigger, improves, restore_snapshot
from .limits import EVAL_MAX_TURNS
from .tools import TOOL_NAMES, TOOLS, ToolConfig
from .trajectory import (Evaluation, FileDiff, Message, StopReason, TaskInfo, ToolCall, ToolCallRecord, Trajectory,
                         Turn, now_iso)

BEST, BEST_CHECK, WORKSPACE = "best", "best_check", "workspace"



class AgentConfig(BaseModel):
    """One episode's settings (recorded in the trajectory). Defaults follow the paper (SPEC §2)."""

    backend: str | None = Field(default=None, description="'cuda' or 'cpu'; None: the local device")
    max_turns: int = Field(default=EVAL_MAX_TURNS, ge=1)
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
    seal_shell: bool = Field(default_factory=seal_by_default, description="bash in its own mount view (bubblewrap): "
                             "the workspace and the toolchain, nothing else of the host (default: yes, unless "
                             "CUDA_AGENT_SEAL=0)")
    isolate_network: bool = Field(default=True, description="bash without network, where the OS allows")
    restrict_writes: bool = Field(default=True, description="unsealed bash: writes only inside the workspace (Landlock)")
    max_seconds: float | None = Field(default=None, gt=0, description="wall-clock budget of the episode (checked "
                                      "before each turn; the final evaluation runs regardless)")
    max_total_tokens: int | None = Field(default=None, ge=1, description="prompt + completion tokens, all turns")
    max_cost_usd: float | None = Field(default=None, gt=0, description="cost budget; needs a price for the model")
    price_table: str | None = Field(default=None, description="JSON price file on top of the built-in table "
                                    "(see agent/prices.py); default $CUDA_AGENT_PRICES")
    system_prompt: str | None = Field(default=None, description="file with a system-prompt template ($skill, "
                                      "$task, $backend, $task_name); default: SKILL.md + the task")
    resume: bool = Field(default=True, description="continue an unfinished episode found in the workdir's journal")

    def tool_config(self) -> ToolConfig:
        return ToolConfig(bash_timeout_s=self.bash_timeout_s, bash_max_timeout_s=max(900.0, self.bash_timeout_s),
                          max_output_chars=self.max_tool_output_chars,
                          shell=ShellConfig(seal=self.seal_shell, isolate_network=self.isolate_network,
                                            restrict_writes=self.restrict_writes, cache_dir=self.eval.cache_dir))

    def price(self, kind: str, model: str | None) -> Price | None:
        """The price per token of a policy `kind` / `model`; a cost budget without one is refused."""
        price = price_for(kind, model, load_table(self.price_table))
        if price is None and self.max_cost_usd is not None:
            raise ValueError(f"--max-cost needs a price for model {model!r}: add it to a price table "
                             '(JSON {"MODEL": {"input": USD_PER_1M, "output": USD_PER_1M}}) given by --prices')
        return price


def run_episode(task: Task, policy: Policy, config: AgentConfig | None = None, workdir: str | Path = "episode", *,
                episode_id: str | None = None, sample: int = 0,
                on_turn: Callable[[Trajectory], None] | None = None,
                workspace: Workspace | None = None) -> Trajectory:
    """Run one episode of `policy` on `task` in `workdir` (workspace in `workdir/workspace`, best
    state in `workdir/best`, turns journaled in `workdir/journal.jsonl`); pass `workspace` to work
    in an existing one instead (its backend wins). An unfinished episode of the same id and task
    in `workdir` (a crash, a killed run, a failed endpoint) is resumed from its journal; anything
    else there is cleared first, so a retry never sees an earlier attempt's files. Never raises
    for what the policy or the candidate did: failures are recorded (`stop_reason`, `error`)."""
    cfg = config or AgentConfig()
    from ..backends import default_backend_name

    backend = workspace.backend if workspace is not None else cfg.backend or default_backend_name()
    root = Path(workdir).resolve()
    root.mkdir(parents=True, exist_ok=True)
    price = cfg.price(policy.config.kind, policy.config.model)
    template = load_template(cfg.system_prompt) if cfg.system_prompt else None
    t_start = time.monotonic()
    cache = Path(cfg.eval.cache_dir) if cfg.eval.cache_dir else None
    journal = Journal(root / JOURNAL)
    traj = _resumable(root, task, episode_id, cfg) if workspace is None else None
    if traj is not None:
        ws = open_workspace(root / WORKSPACE, cache_dir=cache)
        prior = sum(t.model_seconds + t.tool_seconds + t.eval_seconds + t.loop_seconds for t in traj.turns)
        traj.environment.setdefault("resumed_at_turns", []).append(len(traj.turns))
    else:
        prior = 0.0
        for name in (BEST, BEST_CHECK, JOURNAL, BEST + ".tmp", BEST + ".old") + ((WORKSPACE,) if workspace is None
                                                                                 else ()):
            _remove(root / name)
        traj = Trajectory(
            episode_id=episode_id or f"{slug(task.name)}-{uuid.uuid4().hex[:8]}", sample=sample,
            task=TaskInfo(name=task.name, content_hash=task.content_hash, level=task.level, origin=task.origin),
            backend=backend, policy=policy.describe(), config=cfg.model_dump(mode="json"), tools=list(TOOL_NAMES),
            started_at=now_iso(), workdir=str(root))
        ws = workspace if workspace is not None else create_workspace(task, root / WORKSPACE, backend,
                                                                      overwrite=True, cache_dir=cache,
                                                                      rules=cfg.eval.rules)
    try:
        env = Environment(ws, tool_config=cfg.tool_config(), eval_config=cfg.eval)
    except RuntimeError as exc:  # the sealed shell cannot start here: a setup problem, said in one line
        traj.stop_reason, traj.error, traj.finished_at = "error", str(exc), now_iso()
        return traj
    traj.environment["tools"] = env.executor.shell.confinement
    best = BestState(ws.root, root / BEST)
    best.best = traj.best
    episode = _Episode(env, policy, cfg, traj, best, journal, price, template, t_start - prior)
    try:
        traj.stop_reason, traj.error = episode.run(on_turn)
    except Exception as exc:  # a bug or an infrastructure failure: recorded, and the final evaluation still runs
        traj.stop_reason, traj.error = "error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}"
    finally:
        env.close()  # the tools stop; the workspace (ours or the caller's) stays
    try:
        episode.final_evaluation()
    except Exception as exc:  # the environment itself failed: no final verdict, the episode is not finished
        traj.stop_reason = "error"
        traj.error = f"{traj.error + chr(10) if traj.error else ''}final evaluation failed: {type(exc).__name__}: {exc}"
    traj.best = episode.best.best
    traj.seconds = prior + time.monotonic() - t_start
    traj.finished_at = now_iso()
    journal.end(traj)
    return traj


def _resumable(root: Path, task: Task, episode_id: str | None, cfg: AgentConfig) -> Trajectory | None:
    """The journaled trajectory of an unfinished episode of this task in `root`, if it can go on:
    it did not end (a crash or a kill) or ended only because the endpoint failed."""
    if not cfg.resume:
        return None
    try:
        state = load_journal(root / JOURNAL)
    except StoreError:  # damaged: the episode starts again
        return None
    if state is None or state.ended not in (None, "policy_error"):
        return None
    traj = state.trajectory
    if traj.task.content_hash != task.content_hash or (episode_id and traj.episode_id != episode_id):
        return None
    if not (root / WORKSPACE / ".cuda_agent").is_dir():
        return None
    traj.stop_reason, traj.error, traj.finished_at, traj.final = "error", None, "", None
    return traj


def _remove(path: Path) -> None:
    remove_tree(path)  # read-only fixed files and the agent's own folders, any depth
    if os.path.lexists(path):
        raise OSError(f"cannot remove {path}")


class _Episode:
    """The state one episode carries between turns."""

    def __init__(self, env: Environment, policy: Policy, cfg: AgentConfig, traj: Trajectory, best: BestState,
                 journal: Journal, price: Price | None, template: str | None, t0: float):
        self.env, self.ws, self.policy, self.cfg, self.traj, self.best = env, env.ws, policy, cfg, traj, best
        self.journal, self.price, self.template, self.t0 = journal, price, template, t0
        self.files = _read_candidate(self.ws.root)
        limit = min(cfg.context_tokens, policy.context_limit or cfg.context_tokens)
        reserve = min(policy.config.max_tokens, limit // 4)
        self.window = ContextWindow(limit - reserve, tools=TOOLS, keep_recent_turns=cfg.keep_recent_turns,
                                    counter=policy.count_tokens if _has_counter(policy) else None)
        self.evaluated: dict[tuple[str, bool], EvalResult] = {}
        self.nudges_left = cfg.nudges - sum(m.role == "user" and m.content == NUDGE_MESSAGE for m in traj.messages)

    def run(self, on_turn: Callable[[Trajectory], None] | None) -> tuple[StopReason, str | None]:
        if self.traj.messages:  # resumed: the model sees the conversation so far (compacted as needed)
            for m in self.traj.messages:
                self.window.add(m)
            self.journal.mark(self.traj)
        else:
            for m in initial_messages(self.ws, self.template):
                self.traj.messages.append(self.window.add(m))
            self.journal.start(self.traj)
        for turn in range(len(self.traj.turns), self.cfg.max_turns):
            if (over := self._over_budget()) is not None:
                return over
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
                if self.nudges_left > 0 and not self.traj.evaluations:
                    self.nudges_left -= 1
                    self.traj.messages.append(self.window.add(Message(role="user", content=NUDGE_MESSAGE, turn=turn)))
                    self.journal.turn(self.traj, turn)
                    continue
                self.journal.turn(self.traj, turn)
                return "done", None
            trigger = self._run_tools(turn, reply.tool_calls, record)
            if trigger and self.cfg.evaluate_on_verify:
                t_eval = time.monotonic()
                self._evaluate(turn, trigger, self._last_command)
                record.eval_seconds = time.monotonic() - t_eval
            self._record_diffs(turn)
            record.loop_seconds = max(0.0, time.monotonic() - t0 - record.model_seconds - record.tool_seconds
                                      - record.eval_seconds)
            self.traj.best = self.best.best
            self.journal.turn(self.traj, turn)
            if on_turn is not None:
                on_turn(self.traj)
        return "max_turns", None

    def _over_budget(self) -> tuple[StopReason, str] | None:
        cfg, traj = self.cfg, self.traj
        elapsed = time.monotonic() - self.t0
        if cfg.max_seconds is not None and elapsed >= cfg.max_seconds:
            return "time_budget", f"wall-clock budget of {cfg.max_seconds:.0f}s used ({elapsed:.0f}s)"
        if cfg.max_total_tokens is not None and traj.usage.total_tokens >= cfg.max_total_tokens:
            return "token_budget", f"token budget of {cfg.max_total_tokens} used ({traj.usage.total_tokens})"
        if cfg.max_cost_usd is not None and (traj.cost_usd or 0.0) >= cfg.max_cost_usd:
            return "cost_budget", f"cost budget of ${cfg.max_cost_usd:.2f} used (${traj.cost_usd:.4f})"
        return None

    def _record_diffs(self, turn: int) -> None:
        """What the turn changed in the agent's files (model_new.py, kernels/), as unified diffs."""
        now = _read_candidate(self.ws.root)
        for path in sorted(set(now) | set(self.files)):
            old, new = self.files.get(path), now.get(path)
            if old == new:
                continue
            status = "added" if old is None else "deleted" if new is None else "modified"
            a, b = _text(old), _text(new)
            diff = "" if a is None or b is None else "".join(difflib.unified_diff(
                a.splitlines(keepends=True), b.splitlines(keepends=True), f"a/{path}", f"b/{path}"))
            lines = diff.splitlines()
            self.traj.diffs.append(FileDiff(
                turn=turn, path=path, status=status, diff=diff[:_MAX_DIFF],  # type: ignore[arg-type]
                added=sum(ln.startswith("+") and not ln.startswith("+++") for ln in lines),
                removed=sum(ln.startswith("-") and not ln.startswith("---") for ln in lines)))
        self.files = now

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
            if self.price is not None:
                self.traj.cost_usd = self.price.cost(self.traj.usage)
            self.window.calibrate(reply.usage.prompt_tokens, record.context_tokens)
            return reply
        raise AssertionError("unreachable")

    def _run_tools(self, turn: int, calls: list[ToolCall], record: Turn) -> Trigger | None:
        trigger: Trigger | None = None
        self._last_command = None
        for call in calls:
            result = self.env.execute(call)
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

    def _evaluate(self, turn: int | None, trigger: Trigger | str, command: str | None) -> EvalResult:
        """Evaluate the current state (trusted, in this process); record it; snapshot if best."""
        measured = trigger in ("profile", "final")
        chash = candidate_hash(self.ws.root)
        cached = self.evaluated.get((chash, True)) or (None if measured else self.evaluated.get((chash, False)))
        t0 = time.monotonic()
        if cached is not None and (trigger != "final" or self.cfg.reuse_final_evaluation):
            result = cached
        else:
            config = self.cfg.eval if measured else self.cfg.eval.model_copy(update={"measure": False})
            result = self.env.evaluate(config)
            self.evaluated[(chash, measured)] = result
        before = self.best.best.result if self.best.best else None
        improved = improves(result, before) and self.best.consider(result, turn, chash)
        self.traj.evaluations.append(Evaluation(turn=turn, trigger=trigger, command=command,  # type: ignore[arg-type]
                                                candidate_hash=chash, measured=measured, improved=improved,
                                                seconds=time.monotonic() - t0, result=result))
        return result

    def final_evaluation(self) -> None:
        """The environment's verdict on the final state; when that is broken but a best state
        scored, that state too, in full (timing included), in a fresh copy of the workspace."""
        t0 = time.monotonic()
        self.traj.final = self._evaluate(None, "final", None)
        best = self.best.best
        if self.traj.final.reward < 1 and best is not None:
            check = create_workspace(self.ws.task, self.best.dir.with_name(BEST_CHECK), self.ws.backend, overwrite=True,
                                     cache_dir=Path(self.cfg.eval.cache_dir) if self.cfg.eval.cache_dir else None)
            restore_snapshot(best, check.root)
            self.traj.best_final = self.env.evaluator(check, self.cfg.eval)  # type: ignore[assignment]
        if self.traj.turns:
            self.traj.turns[-1].eval_seconds += time.monotonic() - t0


def _has_counter(policy: Policy) -> bool:
    return type(policy).count_tokens is not Policy.count_tokens


_MAX_DIFF = 20_000


def _read_candidate(root: Path) -> dict[str, bytes]:
    return {rel: (root / rel).read_bytes() for rel in candidate_files(root)}


def _text(data: bytes | None) -> str | None:
    if data is None:
        return ""
    if b"\x00" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace")


def slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[-60:]


__all__ = ["AgentConfig", "run_episode"]
