"""The episode journal: every turn appended to `workdir/journal.jsonl` as it happens.

Why: the trajectory is written when an episode ends, so without it a crash lost every turn and
nothing outside the process could see progress. Events are `start` (the trajectory as it began),
`turn` (what that turn added, plus the running best, usage and cost) and `end`; `load_journal`
rebuilds the trajectory so `run_episode` can resume mid-way, and the live view tails it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from pydantic import ValidationError

from ..storage import JsonlWriter, StoreError, read_jsonl
from .trajectory import (Compaction, Evaluation, FileDiff, Message, Snapshot, ToolCallRecord, Trajectory, Turn,
                         Usage)

JOURNAL = "journal.jsonl"
_LISTS = {"messages": Message, "turns": Turn, "tool_calls": ToolCallRecord, "evaluations": Evaluation,
          "compactions": Compaction, "diffs": FileDiff}
"""The trajectory's lists a turn event extends, and the record type of each."""


class Journal:
    """Appends one episode's events through the one JSONL writer (its lock, its torn-tail rule);
    `mark()` / `turn()` write what changed since the last mark; `end()` closes it."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._marks: dict[str, int] = {}
        self._writer = JsonlWriter(self.path)

    def start(self, traj: Trajectory) -> None:
        self._writer.close()
        self.path.unlink(missing_ok=True)
        self._writer.append({"type": "start", "trajectory": traj.model_dump(mode="json")})
        self.mark(traj)

    def mark(self, traj: Trajectory) -> None:
        self._marks = {name: len(getattr(traj, name)) for name in _LISTS}

    def turn(self, traj: Trajectory, index: int) -> None:
        """Write everything `traj` gained since the last mark, then mark again."""
        event: dict[str, Any] = {"type": "turn", "turn": index}
        for name in _LISTS:
            event[name] = [x.model_dump(mode="json") for x in getattr(traj, name)[self._marks.get(name, 0):]]
        event["best"] = traj.best.model_dump(mode="json") if traj.best else None
        event["usage"] = traj.usage.model_dump(mode="json")
        event["cost_usd"] = traj.cost_usd
        self._writer.append(event)
        self.mark(traj)

    def end(self, traj: Trajectory) -> None:
        self._writer.append({"type": "end", "stop_reason": traj.stop_reason, "finished": traj.finished})
        self._writer.close()


class JournalState(NamedTuple):
    """What a journal says: the trajectory so far, and how (whether) the episode ended."""

    trajectory: Trajectory
    ended: str | None  # the stop reason of an `end` event, None while running or after a crash


def load_journal(path: str | Path) -> JournalState | None:
    """Rebuild the trajectory a journal describes; None if there is none or it has no start. A torn
    last line (a kill mid-write) is ignored; a damaged complete line raises `StoreError`."""
    traj: Trajectory | None = None
    ended: str | None = None
    for n, event in enumerate(read_jsonl(path), start=1):
        try:
            if event.get("type") == "start":
                traj, ended = Trajectory.model_validate(event["trajectory"]), None
            elif traj is not None and event.get("type") == "turn":
                for name, kind in _LISTS.items():
                    getattr(traj, name).extend(kind.model_validate(x) for x in event.get(name, []))
                traj.best = Snapshot.model_validate(event["best"]) if event.get("best") else None
                traj.usage = Usage.model_validate(event.get("usage") or {})
                traj.cost_usd = event.get("cost_usd")
            elif traj is not None and event.get("type") == "end":
                ended = str(event.get("stop_reason"))
        except (ValidationError, KeyError, TypeError) as exc:
            raise StoreError(f"{path}: event {n} is not a journal event: {exc}") from None
    return JournalState(traj, ended) if traj is not None else None


__all__ = ["JOURNAL", "Journal", "JournalState", "load_journal"]
