"""The run directory: `run.json` (what the run is) and `results.jsonl` (append-only records).

Each finished task is appended as one JSON line, flushed and fsync'd before the next is
taken, by the driver alone (one writer, many workers). Killing the driver or a worker
therefore loses at most the tasks in flight; a line torn by a kill mid-write is cut off when
the store is next opened, and a resumed run skips every task that already has a record.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from pydantic import ValidationError

from .records import RunInfo, TaskRecord

RUN_FILE = "run.json"
RESULTS_FILE = "results.jsonl"


class RunMismatch(ValueError):
    """The run directory holds a different run than the one asked for."""


class ResultStore:
    """Append-only task records of one run directory."""

    def __init__(self, run_dir: str | Path) -> None:
        self.root = Path(run_dir)
        self.path = self.root / RESULTS_FILE
        self._lock = threading.Lock()

    # ---- the run's description ----------------------------------------------------------------
    def info(self) -> RunInfo | None:
        path = self.root / RUN_FILE
        if not path.is_file():
            return None
        try:
            return RunInfo.model_validate_json(path.read_text())
        except ValidationError as exc:
            raise RunMismatch(f"{path} is not a benchmark run description: {exc}") from None

    def begin(self, info: RunInfo, *, fresh: bool = False) -> RunInfo:
        """Start or resume: a new directory gets `info`; an existing one must describe the same
        run (suite, solutions or policy, backend, config, tasks) unless `fresh` discards it."""
        self.root.mkdir(parents=True, exist_ok=True)
        old = self.info()
        if old is not None and fresh:
            for name in (RUN_FILE, RESULTS_FILE):
                (self.root / name).unlink(missing_ok=True)
            old = None
        if old is not None:
            if old.fingerprint() != info.fingerprint():
                diff = sorted(k for k, v in info.fingerprint().items() if old.fingerprint().get(k) != v)
                raise RunMismatch(f"{self.root} holds another run (differs in: {', '.join(diff)}); "
                                  "choose a new --out directory, or pass --fresh to discard it")
            return old
        _atomic_write(self.root / RUN_FILE, info.model_dump_json(indent=1))
        return info

    # ---- records --------------------------------------------------------------------------------
    def records(self) -> list[TaskRecord]:
        """Every complete record, in the order written; a torn last line is ignored."""
        if not self.path.is_file():
            return []
        out = []
        with self.path.open("rb") as fh:
            for raw in fh:
                if not raw.endswith(b"\n"):
                    break  # torn by a kill mid-write: not a finished record
                try:
                    out.append(TaskRecord.model_validate_json(raw))
                except ValidationError:
                    continue  # a line from a newer or broken writer: skip, keep the rest
        return out

    def latest(self) -> dict[tuple[str, int], TaskRecord]:
        """The last record per (task, sample) (a re-run task's newest record wins)."""
        return {r.key: r for r in self.records()}

    def repair(self) -> int:
        """Cut a torn last line, so the next append starts on a line of its own. Returns the
        number of bytes removed."""
        if not self.path.is_file():
            return 0
        with self.path.open("rb+") as fh:
            data = fh.read()
            keep = data.rfind(b"\n") + 1
            if keep == len(data):
                return 0
            fh.truncate(keep)
            fh.flush()
            os.fsync(fh.fileno())
            return len(data) - keep

    def append(self, record: TaskRecord) -> None:
        """Write one record durably; safe to call from several threads."""
        line = record.model_dump_json() + "\n"
        with self._lock:
            self.root.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(line)
                fh.flush()
                os.fsync(fh.fileno())


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def load_run(run: str | Path) -> tuple[RunInfo | None, list[TaskRecord]]:
    """A run directory or a bare results.jsonl: (its description if any, its latest records)."""
    path = Path(run)
    if path.is_file():
        store = ResultStore(path.parent)
        store.path = path
        info = store.info() if path.name == RESULTS_FILE else None
    elif path.is_dir():
        store = ResultStore(path)
        info = store.info()
        if info is None and not store.path.is_file():
            raise FileNotFoundError(f"{path} holds no benchmark run ({RUN_FILE} / {RESULTS_FILE})")
    else:
        raise FileNotFoundError(f"no such run directory or results file: {path}")
    return info, list(store.latest().values())


__all__ = ["RESULTS_FILE", "RUN_FILE", "ResultStore", "RunMismatch", "load_run"]
