"""Quiet timing for workers that share one device: a writer-preferring reader/writer lock
across processes (two `flock` files).

Why: a worker timing its task while another runs task code on the same GPU records the other's
kernels as its own, so device work holds the lock *shared* and timing *exclusively*; a timer
closes the gate first, so it waits only for sections already running (docs/data.md, measured).
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO


def _gate_path(path: str) -> str:
    return path + ".gate"


def create(path: str | Path) -> str:
    """Make the two lock files (in the parent: sandboxed workers open them read-only)."""
    path = str(Path(path).resolve())
    Path(path).touch()
    Path(_gate_path(path)).touch()
    return path


@contextlib.contextmanager
def _flock(path: str, mode: int) -> Iterator[IO[bytes]]:
    with open(path, "rb") as fh:
        fcntl.flock(fh, mode)
        try:
            yield fh
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextlib.contextmanager
def exclusive(path: str | None) -> Iterator[None]:
    """Time alone: no other worker runs device work until the block ends."""
    if not path:
        yield
        return
    with _flock(_gate_path(path), fcntl.LOCK_EX), _flock(path, fcntl.LOCK_EX):
        yield


@contextlib.contextmanager
def shared(path: str | None, synchronize: Callable[[], None] | None = None) -> Iterator[None]:
    """Run device work alongside other workers, but never while one of them times."""
    if not path:
        yield
        return
    with _flock(_gate_path(path), fcntl.LOCK_EX):
        pass  # wait behind a timer that holds the gate
    with _flock(path, fcntl.LOCK_SH):
        try:
            yield
        finally:
            if synchronize is not None:
                synchronize()
