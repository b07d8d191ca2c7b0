"""Rejection fine-tuning data (stage 2, SPEC §4): trajectories in, a chat SFT dataset out.

An episode is kept only if the environment rewarded it and its tool use is clean (real tools,
arguments that parsed, no loop of identical calls). Each kept episode becomes one row of OpenAI
messages plus the tool schemas the policy was given, so training sees the prompt format of
inference. Every decision is recorded with its reasons.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

from pydantic import BaseModel, Field

from ..agent.tools import TOOL_NAMES, tool_schemas
from ..agent.trajectory import Trajectory, iter_trajectories, latest_by_episode
from ..storage import atomic_write


class RFTFilterConfig(BaseModel):
    """What an episode must satisfy to become training data."""

    min_reward: int = Field(default=0, description="keep episodes whose final reward is strictly above this")
    require_finished: bool = Field(default=True, description="drop episodes that ended in a policy or infra error")
    max_repeats: int = Field(default=2, ge=1, description="most identical consecutive tool calls allowed")
    max_malformed_calls: int = Field(default=0, ge=0, description="calls whose arguments did not parse or validate")
    allow_unknown_tools: bool = False
    max_chars: int | None = Field(default=None, description="drop conversations longer than this many characters")
    max_per_task: int | None = Field(default=None, ge=1, description="keep at most this many episodes per task "
                                     "(highest reward first, then fewest turns)")


class Decision(BaseModel):
    episode_id: str
    task: str
    reward: int
    kept: bool
    reasons: list[str] = Field(default_factory=list)


class RFTReport(BaseModel):
    """What the filter did: counts, reasons, and one decision per episode."""

    total: int = 0
    kept: int = 0
    dropped: int = 0
    reasons: dict[str, int] = Field(default_factory=dict, description="episodes dropped for each reason "
                                    "(an episode can have several)")
    reward_counts: dict[str, int] = Field(default_factory=dict, description="final reward -> episodes (all)")
    decisions: list[Decision] = Field(default_factory=list)

    def summary(self) -> str:
        lines = [f"{self.kept} of {self.total} episodes kept, {self.dropped} dropped"]
        for reason, n in sorted(self.reasons.items(), key=lambda kv: -kv[1]):
            lines.append(f"  {n:5d}  {reason}")
        return "\n".join(lines)


def judge(traj: Trajectory, cfg: RFTFilterConfig) -> list[str]:
    """Every reason `traj` must be dropped (empty: keep it). Reason keys are stable names."""
    reasons: list[str] = []
    if traj.final is None:
        reasons.append("no_final_evaluation")
    elif traj.final_reward <= cfg.min_reward:
        reasons.append(f"reward_not_above_{cfg.min_reward}")
    if cfg.require_finished and not traj.finished:
        reasons.append(f"unfinished:{traj.stop_reason}")
    calls = [c for m in traj.messages if m.role == "assistant" for c in m.tool_calls]
    if not cfg.allow_unknown_tools and any(c.name not in TOOL_NAMES for c in calls):
        reasons.append("unknown_tool")
    malformed = sum(c.arguments is None for c in calls) + sum(
        1 for r in traj.tool_calls if not r.ok and (r.error or "").startswith("invalid arguments"))
    if malformed > cfg.max_malformed_calls:
        reasons.append("malformed_call")
    if _longest_identical_run(calls) > cfg.max_repeats:
        reasons.append("repeated_call_loop")
    if not calls:
        reasons.append("no_tool_use")
    if cfg.max_chars is not None and sum(len(m.content) for m in traj.messages) > cfg.max_chars:
        reasons.append("too_long")
    return reasons


def to_sft_row(traj: Trajectory) -> dict[str, Any]:
    """One kept episode as a chat SFT row: `messages`, `tools`, and provenance in `meta`."""
    final = traj.final
    return {
        "messages": [m.to_openai(parsed_arguments=True) for m in traj.messages],
        "tools": tool_schemas("openai"),
        "meta": {"episode_id": traj.episode_id, "task": traj.task.name, "task_hash": traj.task.content_hash,
                 "reward": traj.final_reward, "turns": len(traj.turns), "backend": traj.backend,
                 "speedup_vs_eager": final.speedup_vs_eager if final else None,
                 "speedup_vs_compile": final.speedup_vs_compile if final else None,
                 "policy": traj.policy.get("model") or traj.policy.get("kind")},
    }


def filter_trajectories(trajectories: Iterable[Trajectory], cfg: RFTFilterConfig | None = None
                        ) -> tuple[list[dict[str, Any]], RFTReport]:
    """Judge every episode (the newest record of each id) and build the rows of the kept ones."""
    cfg = cfg or RFTFilterConfig()
    episodes = list(latest_by_episode(list(trajectories)).values())
    report = RFTReport(total=len(episodes))
    report.reward_counts = dict(Counter(str(t.final_reward) for t in episodes))
    reasons_count: Counter[str] = Counter()
    accepted: list[Trajectory] = []
    for traj in episodes:
        reasons = judge(traj, cfg)
        report.decisions.append(Decision(episode_id=traj.episode_id, task=traj.task.name, reward=traj.final_reward,
                                         kept=not reasons, reasons=reasons))
        reasons_count.update(reasons)
        if not reasons:
            accepted.append(traj)
    if cfg.max_per_task is not None:
        accepted = _cap_per_task(accepted, cfg.max_per_task, report, reasons_count)
    report.kept = len(accepted)
    report.dropped = report.total - report.kept
    report.reasons = dict(reasons_count)
    return [to_sft_row(t) for t in accepted], report


def build_rft_dataset(inputs: list[str | Path], out: str | Path, cfg: RFTFilterConfig | None = None, *,
                      strict: bool = True) -> RFTReport:
    """Read trajectory files, filter, and write `out` (JSONL rows) plus `out`.report.json."""
    trajs: list[Trajectory] = []
    for path in inputs:
        trajs.extend(iter_trajectories(path, strict=strict))
    rows, report = filter_trajectories(trajs, cfg)
    write_sft_rows(rows, out)
    report_path(out).write_text(report.model_dump_json(indent=1))
    return report


def report_path(dataset: str | Path) -> Path:
    p = Path(dataset)
    return p.with_name(p.name + ".report.json")


def write_sft_rows(rows: list[dict[str, Any]], out: str | Path) -> None:
    atomic_write(out, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


def load_sft_rows(path: str | Path) -> list[dict[str, Any]]:
    """Rows written by `build_rft_dataset`; a row without messages is an error naming its line."""
    rows = []
    with Path(path).open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            row = json.loads(line)
            if not isinstance(row, dict) or not isinstance(row.get("messages"), list) or not row["messages"]:
                raise ValueError(f"{path}:{n}: not an SFT row (needs a non-empty 'messages' list)")
            rows.append(row)
    return rows


def _longest_identical_run(calls: list[Any]) -> int:
    best = run = 0
    prev = None
    for c in calls:
        key = (c.name, json.dumps(c.arguments, sort_keys=True) if c.arguments is not None else c.raw_arguments)
        run = run + 1 if key == prev else 1
        prev = key
        best = max(best, run)
    return best


def _cap_per_task(accepted: list[Trajectory], cap: int, report: RFTReport, counts: Counter[str]) -> list[Trajectory]:
    by_task: dict[str, list[Trajectory]] = {}
    for t in accepted:
        by_task.setdefault(t.task.content_hash, []).append(t)
    keep: set[str] = set()
    for group in by_task.values():
        group.sort(key=lambda t: (-t.final_reward, len(t.turns), t.episode_id))
        keep.update(t.episode_id for t in group[:cap])
    for d in report.decisions:
        if d.kept and d.episode_id not in keep:
            d.kept = False
            d.reasons.append("over_max_per_task")
            counts["over_max_per_task"] += 1
    return [t for t in accepted if t.episode_id in keep]


__all__ = ["RFTFilterConfig", "RFTReport", "Decision", "judge", "filter_trajectories", "build_rft_dataset",
           "to_sft_row", "write_sft_rows", "load_sft_rows", "report_path"]
