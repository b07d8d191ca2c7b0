"""Where the viewer finds episodes under a run folder, and the typed rows it lists them as.

It reads what the other layers write, as they write it (no export step):
- `optimize`: `trajectories.jsonl` (one Trajectory per line, the latest record per episode
  wins) and, for episodes still running or cut short by a crash, `episodes/<id>/journal.jsonl`;
- `bench`: `workspaces/<task>.trajectory.json` (one Trajectory per file) beside `results.jsonl`;
- `train`: any other JSONL of Trajectory records (the RFT filter's inputs) and the RFT dataset
  rows it writes (`{"messages", "tools", "meta"}`), shown as conversations.
Unreadable lines are skipped, never fatal: a viewer must open a half-written run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from ..agent.journal import JOURNAL, load_journal
from ..agent.trajectory import SCHEMA_VERSION, Trajectory
from ..storage import StoreError

Source = Literal["optimize", "bench", "train"]
_SKIP_DIRS = {"workspace", "best", "best_check", "kernels", "build", ".cuda_agent", "__pycache__", "logs"}


class EpisodeRow(BaseModel):
    """One line of the episode list."""

    key: str
    source: Source
    file: str
    episode_id: str
    task: str
    status: str  # the stop reason, "running", or "unfinished" (a journal without an end)
    final_reward: int | None = None
    best_reward: int | None = None
    delivered_reward: int | None = None
    speedup_vs_compile: float | None = None
    speedup_vs_eager: float | None = None
    turns: int = 0
    tokens: int = 0
    cost_usd: float | None = None
    seconds: float | None = None
    started_at: str = ""
    policy: str = ""


@dataclass
class RunIndex:
    """Everything found under one folder; `episodes[key]` is a Trajectory or an SFT row (dict)."""

    root: Path
    rows: list[EpisodeRow] = field(default_factory=list)
    episodes: dict[str, Trajectory | dict[str, Any]] = field(default_factory=dict)

    def add(self, source: Source, path: Path, item: Trajectory | dict[str, Any], status: str | None = None) -> None:
        file = path.relative_to(self.root).as_posix()
        name = item.episode_id if isinstance(item, Trajectory) else f"row{len(self.rows)}"
        key = f"{file}::{name}"  # stable across rescans while the run grows
        row = _row_of(key, source, file, item, status)
        self.rows.append(row)
        self.episodes[key] = item


def scan(root: str | Path) -> RunIndex:
    """Index every episode under `root` (a file is indexed as its own run)."""
    root = Path(root).resolve()
    index = RunIndex(root if root.is_dir() else root.parent)
    files = [root] if root.is_file() else sorted(_walk(root))
    recorded: set[str] = set()  # episode ids already shown from a trajectory file (ids carry a hash or uuid)
    journals: list[Path] = []
    for path in files:
        if path.name == JOURNAL:
            journals.append(path)
        elif path.name.endswith(".trajectory.json"):
            traj = _trajectory(_json(path))
            if traj is not None:
                index.add("bench", path, traj)
                recorded.add(traj.episode_id)
        elif path.suffix == ".jsonl":
            _add_jsonl(index, path, recorded)
    for path in journals:  # running or crashed episodes with no record yet
        if path.parent.name in recorded:  # the folder is named after its episode: already recorded, not re-read
            continue
        try:
            state = load_journal(path)
        except StoreError:  # a damaged journal: the viewer shows the rest, not nothing
            continue
        if state is None or state.trajectory.episode_id in recorded:
            continue
        index.add("optimize", path, state.trajectory, "running" if state.ended is None else state.ended)
    order = {"optimize": 0, "bench": 1, "train": 2}
    index.rows.sort(key=lambda r: (order[r.source], r.file, r.task, r.episode_id))
    return index


def _walk(root: Path) -> list[Path]:
    out: list[Path] = []
    for child in root.iterdir():
        if child.is_dir() and not child.is_symlink():
            if child.name not in _SKIP_DIRS:
                out += _walk(child)
        elif child.is_file() and (child.suffix == ".jsonl" or child.name.endswith(".trajectory.json")):
            out.append(child)
    return out


def _add_jsonl(index: RunIndex, path: Path, recorded: set[str]) -> None:
    latest: dict[str, Trajectory] = {}
    rows: list[dict[str, Any]] = []
    with path.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            try:
                raw = json.loads(line)
            except json.JSONDecodeError:
                continue
            if not isinstance(raw, dict):
                continue
            if "episode_id" in raw and "schema_version" in raw:
                traj = _trajectory(raw)
                if traj is not None:
                    latest[traj.episode_id] = traj
            elif isinstance(raw.get("messages"), list) and isinstance(raw.get("meta"), dict):
                rows.append(raw)
    source: Source = "optimize" if path.name == "trajectories.jsonl" else "train"
    for traj in latest.values():
        index.add(source, path, traj)
        recorded.add(traj.episode_id)
    for row in rows:
        index.add("train", path, row, "sft row")


def _trajectory(raw: Any) -> Trajectory | None:
    if not isinstance(raw, dict) or not isinstance(raw.get("schema_version"), int) \
            or raw["schema_version"] > SCHEMA_VERSION:
        return None
    try:
        return Trajectory.model_validate(raw)
    except ValidationError:
        return None


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, json.JSONDecodeError):
        return None


def _row_of(key: str, source: Source, file: str, item: Trajectory | dict[str, Any], status: str | None) -> EpisodeRow:
    if isinstance(item, Trajectory):
        f, d = item.final, item.delivered
        return EpisodeRow(
            key=key, source=source, file=file, episode_id=item.episode_id, task=item.task.name,
            status=status or item.stop_reason, final_reward=f.reward if f else None,
            best_reward=item.best.result.reward if item.best else None, delivered_reward=d.reward if d else None,
            speedup_vs_compile=d.speedup_vs_compile if d else None, speedup_vs_eager=d.speedup_vs_eager if d else None,
            turns=len(item.turns), tokens=item.usage.total_tokens, cost_usd=item.cost_usd,
            seconds=item.seconds or None, started_at=item.started_at,
            policy=str(item.policy.get("model") or item.policy.get("kind") or ""))
    meta = item.get("meta", {})
    return EpisodeRow(key=key, source=source, file=file, episode_id=str(meta.get("episode_id", "")),
                      task=str(meta.get("task", "")), status=status or "", final_reward=meta.get("reward"),
                      delivered_reward=meta.get("reward"), speedup_vs_compile=meta.get("speedup_vs_compile"),
                      speedup_vs_eager=meta.get("speedup_vs_eager"), turns=int(meta.get("turns") or 0),
                      policy=str(meta.get("policy") or ""))


__all__ = ["EpisodeRow", "RunIndex", "scan"]
