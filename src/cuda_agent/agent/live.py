"""The live view of a batch: one row per running episode (turn, last tool, best reward so far,
tokens, cost), tailed from the episodes' journals. Why journals: whichever process runs the
episode writes them, so the view needs no channel of its own and shows what a crash would keep.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from rich.progress import Progress
from rich.table import Table

from .journal import JOURNAL


@dataclass
class EpisodeView:
    """What the board knows of one episode."""

    episode_id: str
    turn: int = -1
    last_tool: str = ""
    best_reward: int | None = None
    tokens: int = 0
    cost_usd: float | None = None
    ended: str | None = None
    started: float = field(default_factory=time.monotonic)

    def apply(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "start":
            self.turn, self.last_tool, self.best_reward, self.ended = -1, "", None, None
            self.started = time.monotonic()
        elif kind == "turn":
            self.turn = int(event.get("turn", self.turn))
            for call in event.get("tool_calls", []):
                self.last_tool = _describe(call)
            for ev in event.get("evaluations", []):
                reward = ev.get("result", {}).get("reward")
                if isinstance(reward, int) and (self.best_reward is None or reward > self.best_reward):
                    self.best_reward = reward
            usage = event.get("usage") or {}
            self.tokens = int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0))
            self.cost_usd = event.get("cost_usd")
        elif kind == "end":
            self.ended = str(event.get("stop_reason"))


def _describe(call: dict[str, Any]) -> str:
    args = call.get("arguments") or {}
    detail = args.get("command") or args.get("path") or args.get("pattern") or ""
    detail = " ".join(str(detail).split())
    mark = "" if call.get("ok", True) else " [red](error)[/]"
    return f"{call.get('name', '?')} {detail[:48]}{'…' if len(detail) > 48 else ''}{mark}"


class JournalBoard:
    """Tails `episodes/<id>/journal.jsonl` under a batch folder for the given episode ids."""

    def __init__(self, out: Path, episode_ids: Iterable[str] = ()):
        self.root = Path(out) / "episodes"
        self.views: dict[str, EpisodeView] = {}
        self._offsets: dict[str, int] = dict.fromkeys(episode_ids, 0)  # each refresh reads only new bytes
        self._partial: dict[str, bytes] = dict.fromkeys(self._offsets, b"")

    def poll(self) -> None:
        for eid, offset in list(self._offsets.items()):
            path = self.root / eid / JOURNAL
            try:
                size = path.stat().st_size
            except OSError:
                continue
            if size < offset:  # a fresh attempt started the journal again
                offset, self._partial[eid] = 0, b""
            if size == offset:
                continue
            with path.open("rb") as fh:
                fh.seek(offset)
                data = self._partial[eid] + fh.read(size - offset)
            self._offsets[eid] = size
            *lines, self._partial[eid] = data.split(b"\n")
            view = self.views.setdefault(eid, EpisodeView(eid))
            for line in lines:
                try:
                    view.apply(json.loads(line))
                except (json.JSONDecodeError, TypeError, ValueError):
                    continue

    def running(self) -> list[EpisodeView]:
        self.poll()
        return [v for v in self.views.values() if v.ended is None]

    def table(self) -> Table:
        table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold dim")
        for col, just in (("episode", "left"), ("turn", "right"), ("last tool", "left"), ("best", "right"),
                          ("tokens", "right"), ("cost", "right"), ("time", "right")):
            table.add_column(col, justify=just)  # type: ignore[arg-type]
        for v in self.running():
            best = "-" if v.best_reward is None else f"{v.best_reward:+d}"
            cost = "-" if v.cost_usd is None else f"${v.cost_usd:.3f}"
            table.add_row(v.episode_id[-40:], str(v.turn + 1), v.last_tool, best, f"{v.tokens:,}", cost,
                          f"{time.monotonic() - v.started:.0f}s")
        return table


class BoardProgress(Progress):
    """A rich Progress whose display also holds the running episodes' table."""

    def __init__(self, *columns: Any, board: JournalBoard, **kw: Any):
        self.board = board  # before Progress starts rendering
        super().__init__(*columns, **kw)

    def get_renderables(self) -> Iterable[Any]:
        yield self.make_tasks_table(self.tasks)
        table = self.board.table()
        if table.row_count:
            yield table


__all__ = ["JournalBoard", "BoardProgress", "EpisodeView"]
