"""Best-state tracking: a copy of `kernels/` + `model_new.py` whenever an evaluation improves.

What counts is never read from the agent's output (it could print any reward): when the agent
runs verify or profile, the loop evaluates the same state itself. The command only decides
*when* to look, so a disguised command can at most cost an evaluation, never forge a score.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import shutil
from pathlib import Path
from typing import Literal

from ..evaluation.records import EvalResult
from .trajectory import Snapshot

Trigger = Literal["verify", "profile"]
CANDIDATE_FILES = ("model_new.py",)
CANDIDATE_DIRS = ("kernels",)

_PROFILE = re.compile(r"(?:^|[\s;&|(/`])profile\.sh(?![\w.])|\bcuda[-_]agent\s+evaluate\b(?![^;&|]*--no-timing)")
_VERIFY = re.compile(r"(?:^|[\s;&|(/`])verify\.sh(?![\w.])|\bcuda[-_]agent\s+evaluate\b[^;&|]*--no-timing")


def eval_trigger(command: str) -> Trigger | None:
    """Whether a bash command runs the environment's verify or profile step (profile wins)."""
    if _PROFILE.search(command):
        return "profile"
    if _VERIFY.search(command):
        return "verify"
    return None


def candidate_files(root: Path) -> list[str]:
    """The agent's deliverable: model_new.py and the regular files in kernels/ (no symlinks)."""
    out = [f for f in CANDIDATE_FILES if (root / f).is_file() and not (root / f).is_symlink()]
    for d in CANDIDATE_DIRS:
        folder = root / d
        if folder.is_dir() and not folder.is_symlink():
            out += sorted(f"{d}/{p.name}" for p in folder.iterdir() if p.is_file() and not p.is_symlink())
    return out


_NOT_STATE = ("build", ".cuda_agent", "__pycache__")


def candidate_hash(root: Path) -> str:
    """Content hash of everything an evaluation reads (every workspace file but build outputs
    and the record, fixed files included so tampering changes it): equal hashes evaluate equally."""
    h = hashlib.sha256()
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                   if (p.is_file() or p.is_symlink()) and not set(p.relative_to(root).parts) & set(_NOT_STATE))
    for rel in files:
        path = root / rel
        data = os.readlink(path).encode() if path.is_symlink() else path.read_bytes()
        h.update(f"{rel}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def score_key(result: EvalResult) -> tuple[int, float]:
    """Order of results: reward first, then log speedup (vs compile where timed, else vs eager)."""
    if result.speedup_vs_compile:
        speed = math.log2(result.speedup_vs_compile)
    elif result.speedup_vs_eager:
        speed = math.log2(result.speedup_vs_eager)
    else:
        speed = -math.inf  # correct but not timed: ranks below any timed correct result
    return result.reward, speed


def improves(new: EvalResult, best: EvalResult | None) -> bool:
    """A correct result improves on nothing, and on any lower-scoring result."""
    if new.reward < 1:
        return False
    return best is None or score_key(new) > score_key(best)


class BestState:
    """The best evaluated state of one workspace, copied to `snapshot_dir`."""

    def __init__(self, root: Path, snapshot_dir: Path):
        self.root = root
        self.dir = snapshot_dir
        self.best: Snapshot | None = None

    def consider(self, result: EvalResult, turn: int | None, chash: str) -> bool:
        """Snapshot the workspace if `result` (for the state hashed `chash`) is the best so far."""
        if not improves(result, self.best.result if self.best else None):
            return False
        if candidate_hash(self.root) != chash:  # changed since it was evaluated: do not mislabel
            return False
        files = candidate_files(self.root)
        tmp = self.dir.with_name(self.dir.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        for rel in files:
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(self.root / rel, tmp / rel)
        tmp.mkdir(parents=True, exist_ok=True)
        old = self.dir.with_name(self.dir.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        if self.dir.exists():
            os.replace(self.dir, old)
        os.replace(tmp, self.dir)
        shutil.rmtree(old, ignore_errors=True)
        self.best = Snapshot(turn=turn, candidate_hash=chash, path=str(self.dir), files=files, result=result)
        return True


def restore_snapshot(snapshot: Snapshot, target: Path) -> list[str]:
    """Copy a snapshot's files into `target`, replacing its kernels/ (used to export or replay)."""
    src = Path(snapshot.path)
    kernels = target / "kernels"
    if kernels.is_dir():
        for old in kernels.iterdir():
            if old.is_file() or old.is_symlink():
                old.unlink()
    for rel in snapshot.files:
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src / rel, target / rel)
    return list(snapshot.files)


__all__ = ["BestState", "eval_trigger", "candidate_files", "candidate_hash", "improves", "score_key",
           "restore_snapshot"]
