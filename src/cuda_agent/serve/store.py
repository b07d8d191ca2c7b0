"""The service's durable state: every accepted request and its result, in one SQLite file.

Why SQLite: an accepted request must survive a crash of the service (WAL, synchronous=FULL: a
row is on disk before the client hears "accepted"), and the service needs keyed lookups
(idempotency by content hash) that the append-only JSONL store does not give. One connection,
one lock: the writes are a few per evaluation, never the bottleneck."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..evaluation import EvalResult
from .models import Evaluation

_SCHEMA = """
CREATE TABLE IF NOT EXISTS evaluations (
    id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    status TEXT NOT NULL,
    task TEXT NOT NULL,
    job TEXT NOT NULL,
    result TEXT,
    error TEXT,
    slot TEXT,
    runs INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL
);
CREATE INDEX IF NOT EXISTS evaluations_status ON evaluations(status, seq);
CREATE TABLE IF NOT EXISTS episodes (
    id TEXT PRIMARY KEY,
    state TEXT NOT NULL
);
"""

INTERRUPTED = ("interrupted: the service stopped while this evaluation ran; it was not re-run (a partial run "
               "may have used the device). Submit it again to evaluate it.")


class Store:
    """Evaluations by id (content hash). Status moves queued -> running -> done | failed."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        with self._tx() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            db.executescript(_SCHEMA)

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            yield self._db

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # --- requests ---------------------------------------------------------------------------
    def add(self, rows: list[tuple[str, str, dict[str, Any]]]) -> None:
        """Insert new (id, task, job) rows as queued, all or none, in submission order."""
        now = time.time()
        with self._tx() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                seq = db.execute("SELECT COALESCE(MAX(seq), 0) FROM evaluations").fetchone()[0]
                for i, (key, task, job) in enumerate(rows):
                    db.execute("INSERT INTO evaluations(id, seq, status, task, job, created_at) VALUES (?,?,?,?,?,?)",
                               (key, seq + 1 + i, "queued", task, json.dumps(job), now))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def requeue(self, key: str) -> None:
        """A failed evaluation submitted again: queued afresh (its old error dropped)."""
        with self._tx() as db:
            db.execute("UPDATE evaluations SET status='queued', error=NULL, slot=NULL, started_at=NULL, "
                       "finished_at=NULL, created_at=? WHERE id=? AND status='failed'", (time.time(), key))

    def start(self, key: str) -> bool:
        """Mark a queued row running (a worker took it); False if it is not queued any more."""
        with self._tx() as db:
            cur = db.execute("UPDATE evaluations SET status='running', runs=runs+1, started_at=? "
                             "WHERE id=? AND status='queued'", (time.time(), key))
            return cur.rowcount == 1

    def finish(self, key: str, *, result: EvalResult | None = None, error: str | None = None,
               slot: str | None = None, extra_runs: int = 0) -> None:
        """Store the verdict (done) or why there is none (failed); `extra_runs`: the slot's retries."""
        status = "done" if result is not None else "failed"
        with self._tx() as db:
            db.execute("UPDATE evaluations SET status=?, result=?, error=?, slot=?, finished_at=?, runs=runs+? "
                       "WHERE id=?", (status, result.model_dump_json() if result is not None else None, error, slot,
                                      time.time(), max(0, extra_runs), key))

    def recover(self) -> list[tuple[str, dict[str, Any]]]:
        """After a restart: what was running is failed explicitly (it may have half-run; running it
        again unasked could run it twice); what was queued is returned, oldest first, to run."""
        with self._tx() as db:
            db.execute("UPDATE evaluations SET status='failed', error=?, finished_at=? WHERE status='running'",
                       (INTERRUPTED, time.time()))
            rows = db.execute("SELECT id, job FROM evaluations WHERE status='queued' ORDER BY seq").fetchall()
        return [(key, json.loads(job)) for key, job in rows]

    # --- reads ------------------------------------------------------------------------------
    def get(self, key: str) -> Evaluation | None:
        with self._tx() as db:
            row = db.execute("SELECT id, status, task, created_at, started_at, finished_at, runs, slot, error, result "
                             "FROM evaluations WHERE id=?", (key,)).fetchone()
        if row is None:
            return None
        key, status, task, created, started, finished, runs, slot, error, result = row
        return Evaluation(id=key, status=status, task=task, created_at=created, started_at=started,
                          finished_at=finished, runs=runs, slot=slot, error=error,
                          result=EvalResult.model_validate_json(result) if result else None)

    def job(self, key: str) -> dict[str, Any] | None:
        with self._tx() as db:
            row = db.execute("SELECT job FROM evaluations WHERE id=?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def counts(self) -> dict[str, int]:
        with self._tx() as db:
            rows = db.execute("SELECT status, COUNT(*) FROM evaluations GROUP BY status").fetchall()
        return {status: n for status, n in rows}

    # --- episodes (OpenEnv-style sessions) ---------------------------------------------------
    def put_episode(self, key: str, state: dict[str, Any]) -> None:
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO episodes(id, state) VALUES (?, ?)", (key, json.dumps(state)))

    def episode(self, key: str) -> dict[str, Any] | None:
        with self._tx() as db:
            row = db.execute("SELECT state FROM episodes WHERE id=?", (key,)).fetchone()
        return json.loads(row[0]) if row else None


__all__ = ["INTERRUPTED", "Store"]
