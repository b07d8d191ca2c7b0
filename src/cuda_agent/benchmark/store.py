"""The run directory: `run.json` (what the run is) and `results.jsonl` (append-only records).

Each finished task is appended as one JSON line, flushed and fsync'd before the next is
taken, by the driver alone (one writer, many workers). Killing the driver or a worker
therefore loses at most the tasks in flight; a line torn by a kill mid-write is cut off before
the next append (`cuda_agent.storage`), and a resumed run skips every task that already has a record.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from ..storage import JsonlWriter, atomic_write, read_jsonl
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
        self._writer: JsonlWriter | None = None

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
        atomic_write(self.root / RUN_FILE, info.model_dump_json(indent=1))
        return info

    # ---- records --------------------------------------------------------------------------------
    def records(self) -> list[TaskRecord]:
        """Every complete record, in the order written; a torn last line is ignored."""
        out = []
        for raw in read_jsonl(self.path):
            try:
                out.append(TaskRecord.model_validate(raw))
            except ValidationError:
                continue  # a record from a newer or broken writer: skip, keep the rest
        return out

    def latest(self) -> dict[tuple[str, int], TaskRecord]:
        """The last record per (task, sample) (a re-run task's newest record wins)."""
        return {r.key: r for r in self.records()}

    def append(self, record: TaskRecord) -> None:
        """Write one record durably; safe to call from several threads; one writer per file."""
        if self._writer is None:
            self._writer = JsonlWriter(self.path)
        self._writer.append(record)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


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
