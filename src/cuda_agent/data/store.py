"""The output directory of a synthesis run: append-only JSONL, a parquet copy, a manifest
(the layout is in docs/data.md). A line is appended as each candidate finishes, so a crash loses
at most the candidates in flight; resuming skips every candidate index already recorded.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from ..storage import JsonlWriter, StoreError as _StorageError, atomic_write, read_jsonl
from .config import SynthConfig

# Settings that may change between a run and its resumption (how much, how fast; not what).
_RESUMABLE = ("count", "workers", "max_candidates", "time_budget_s", "candidate_timeout_s", "parquet_every", "devices")
# Parquet column types: every row has every column, so the file has one stable schema.
TASK_COLUMNS: dict[str, str] = {
    "ops": "string", "data_source": "string", "code": "string", "name": "string", "candidate": "int64",
    "seed": "int64", "generator": "string", "runtime_ms": "float64", "device": "string", "backend": "string",
    "input_shapes": "string", "output_shapes": "string", "filters": "string", "similarity_eval": "float64",
    "similar_eval_task": "string", "similarity_set": "float64", "torch_version": "string", "created": "string",
    "nearest_eval": "string", "eval_score": "float64", "canonical_ops": "string", "first_call_ms": "float64",
}


class StoreError(_StorageError):
    """The directory cannot be used (another run's settings, unreadable files)."""


class DatasetStore:
    """One synthesis output directory. Thread-safe appends."""

    def __init__(self, root: str | Path, config: SynthConfig, versions: dict[str, Any]):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.manifest_path = self.root / "manifest.json"
        self.candidates_path = self.root / "candidates.jsonl"
        self.tasks_path = self.root / "tasks.jsonl"
        self.parquet_path = self.root / "tasks.parquet"
        self._lock = threading.Lock()
        self._check_manifest(config, versions)
        self.candidates = read_jsonl(self.candidates_path)
        self.tasks = read_jsonl(self.tasks_path)
        self._task_writer = JsonlWriter(self.tasks_path)
        self._candidate_writer = JsonlWriter(self.candidates_path)

    def _check_manifest(self, config: SynthConfig, versions: dict[str, Any]) -> None:
        settings = config.model_dump(mode="json", exclude=set(_RESUMABLE))
        if self.manifest_path.is_file():
            try:
                old = json.loads(self.manifest_path.read_text())
            except ValueError as exc:
                raise StoreError(f"{self.manifest_path} is unreadable: {exc}") from None
            if old.get("settings") != settings:
                changed = sorted(k for k in set(settings) | set(old.get("settings", {}))
                                 if settings.get(k) != old.get("settings", {}).get(k))
                raise StoreError(f"{self.root} holds a run with other settings ({', '.join(changed)}); "
                                 "resume with the same settings or use a new directory")
        elif any(p.name != ".lock" for p in self.root.iterdir()):  # the run lock (isolation.processes.RunLock) may be there first
            raise StoreError(f"{self.root} is not empty and has no manifest.json; use a new directory")
        manifest = {"settings": settings, "versions": versions, "format": 1}
        atomic_write(self.manifest_path, json.dumps(manifest, indent=1))

    # ---- reading ---------------------------------------------------------------------------
    def done(self) -> set[int]:
        return {int(c["index"]) for c in self.candidates if "index" in c}

    # ---- writing ---------------------------------------------------------------------------
    def add_candidate(self, record: dict[str, Any], task_row: dict[str, Any] | None = None) -> None:
        """Record one finished candidate (and its task row if accepted), durably, in that order
        reversed: the task line first, so a crash between the two only re-runs the candidate."""
        with self._lock:
            if task_row is not None:
                row = {col: task_row.get(col) for col in TASK_COLUMNS}
                self._task_writer.append(row)
                self.tasks.append(row)
            self._candidate_writer.append(record)
            self.candidates.append(record)

    def write_parquet(self) -> Path:
        """Rewrite tasks.parquet from the accepted rows (atomic: a reader never sees half a file)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        with self._lock:
            rows = list(self.tasks)
        schema = pa.schema([(c, getattr(pa, t)()) for c, t in TASK_COLUMNS.items()])
        table = pa.Table.from_pylist([{c: r.get(c) for c in TASK_COLUMNS} for r in rows], schema=schema)
        tmp = self.parquet_path.with_suffix(".parquet.tmp")
        pq.write_table(table, tmp)
        os.replace(tmp, self.parquet_path)
        return self.parquet_path
