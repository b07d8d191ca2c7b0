"""Append-only JSONL files and atomic writes: the one home for what long jobs keep on disk
(trajectories, benchmark results, synthesised tasks, training metrics).

One rule for a torn last line: a line without its newline is a record a kill interrupted, so
readers ignore it and a writer cuts it before its first append. A complete line that is not
JSON is damage: it raises `StoreError` naming the file and line instead of vanishing. A writer
holds an exclusive `flock` on its file for its lifetime (the kernel drops it when the holder
dies), so a second writer fails at once (`StoreBusy`) instead of interleaving lines.
"""

from __future__ import annotations

import fcntl
import json
import mmap
import os
import threading
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import BaseModel


class StoreError(RuntimeError):
    """A results file is damaged or cannot be written."""


class StoreBusy(StoreError):
    """Another live writer holds the file."""


def atomic_write(path: str | Path, text: str) -> None:
    """Replace `path` with `text` all at once: a reader sees the old file or the new, never half."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}.{threading.get_ident()}")
    with tmp.open("w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Every complete record of a JSONL file, in order; [] when the file does not exist."""
    path = Path(path)
    if not path.is_file():
        return []
    data = path.read_bytes()
    lines = data.split(b"\n")
    complete = lines[:-1]  # after the last newline: "" or an interrupted record, never read
    out = []
    for n, raw in enumerate(complete, start=1):
        if not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except ValueError:
            raise StoreError(f"{path}:{n}: not a JSON record (only an unfinished last line is dropped)") from None
        if not isinstance(value, dict):
            raise StoreError(f"{path}:{n}: a JSON {type(value).__name__}, not a record")
        out.append(value)
    return out


def cut_torn_tail(path: str | Path) -> int:
    """Remove an unfinished last line so the next record starts on its own line; bytes removed."""
    path = Path(path)
    if not path.is_file():
        return 0
    with path.open("rb+") as fh:
        return _cut(fh)


def _cut(fh: BinaryIO) -> int:
    size = fh.seek(0, os.SEEK_END)
    if size == 0:
        return 0
    with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as view:  # rfind reads only the tail's pages
        keep = view.rfind(b"\n") + 1
    if keep == size:
        return 0
    fh.truncate(keep)
    fh.flush()
    os.fsync(fh.fileno())
    return size - keep


class JsonlWriter:
    """The one writer of a JSONL file: appends are whole lines, fsynced, safe from several
    threads; the file's lock is taken (and a torn tail cut) on the first append."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._fh: BinaryIO | None = None
        self._lock = threading.Lock()

    def append(self, record: dict[str, Any] | BaseModel) -> None:
        line = record.model_dump_json() if isinstance(record, BaseModel) else json.dumps(record)
        data = (line + "\n").encode()
        with self._lock:
            fh = self._fh or self._open()
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())

    def _open(self) -> BinaryIO:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fh = self.path.open("ab+")
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            raise StoreBusy(f"{self.path} is being written by another live writer") from None
        _cut(fh)
        self._fh = fh
        return fh

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()  # closing drops the flock
                self._fh = None

    def __enter__(self) -> "JsonlWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        fh = getattr(self, "_fh", None)
        if fh is not None:
            fh.close()


__all__ = ["JsonlWriter", "StoreBusy", "StoreError", "atomic_write", "cut_torn_tail", "read_jsonl"]
