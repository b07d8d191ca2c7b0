"""The checked bytes: a private, content-addressed copy of a workspace's `model_new.py` and
`kernels/` that the static checks read, the build compiles and the candidate imports.

The workspace is hostile and may change while it is being evaluated (a background process the
agent left running); nothing after the snapshot reads it again. The copy holds regular files only
(a link must stay inside the workspace and is copied as its target's bytes; FIFOs, devices and
sockets are refused), within size bounds, beside the language's own `binding.cpp` and
`binding_registry.h` (never the workspace's). It lives in the build cache (not writable by any
candidate) under the digest of everything in it, so two identical workspaces share one.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

MAX_FILES = 512
MAX_FILE_BYTES = 8 << 20
MAX_TOTAL_BYTES = 32 << 20
FIXED = ("binding.cpp", "binding_registry.h")
MARKER = ".snapshot"  # beside model_new.py: the candidate imports this copy, not the workspace's


class SnapshotError(Exception):
    """The workspace holds something that cannot be checked or built; `file` names it."""

    def __init__(self, file: str, message: str, rule: str = "workspace-file"):
        super().__init__(f"{file}: {message}")
        self.file, self.message, self.rule = file, message, rule


@dataclass(frozen=True)
class Snapshot:
    root: Path  # holds model_new.py (when the workspace has one), kernels/**, binding.cpp, binding_registry.h
    digest: str
    files: tuple[str, ...]  # kernels/ entries, posix paths relative to `root`, sorted

    @property
    def kernels(self) -> Path:
        return self.root / "kernels"


def take_snapshot(workspace: str | Path, cache: Path, templates: Path) -> Snapshot:
    """Copy what the workspace holds now into the cache (or find the identical copy there)."""
    ws = Path(workspace).resolve()
    contents: dict[str, bytes] = {}
    model_new = ws / "model_new.py"
    if os.path.lexists(model_new):
        contents["model_new.py"] = _read(model_new, ws, "model_new.py")
    kdir = ws / "kernels"
    if kdir.is_symlink():
        raise SnapshotError("kernels", "kernels/ is a link; it must be a directory in the workspace",
                            "file-outside-workspace")
    if kdir.is_dir():
        _walk(kdir, ws, contents)
    for name in FIXED:
        contents[name] = (templates / name).read_bytes()
    h = hashlib.sha256()
    for rel in sorted(contents):
        h.update(rel.encode() + b"\0" + str(len(contents[rel])).encode() + b"\0" + contents[rel])
    digest = h.hexdigest()
    root = cache / "sources" / digest[:40]
    if not (root / MARKER).exists():
        _materialise(root, contents)
    else:
        touch(root)
    files = tuple(sorted(r for r in contents if r.startswith("kernels/")))
    return Snapshot(root=root, digest=digest, files=files)


def _walk(kdir: Path, ws: Path, contents: dict[str, bytes]) -> None:
    todo = [kdir]
    total = 0
    while todo:
        d = todo.pop()
        with os.scandir(d) as it:
            entries = sorted(it, key=lambda e: e.name)
        for e in entries:
            rel = Path(e.path).relative_to(ws).as_posix()
            if e.is_dir(follow_symlinks=False):
                todo.append(Path(e.path))
                continue
            if len(contents) >= MAX_FILES:
                raise SnapshotError("kernels", f"more than {MAX_FILES} files in kernels/")
            data = _read(Path(e.path), ws, rel)
            total += len(data)
            if total > MAX_TOTAL_BYTES:
                raise SnapshotError("kernels", f"kernels/ holds more than {MAX_TOTAL_BYTES >> 20} MiB")
            contents[rel] = data


def _read(path: Path, ws: Path, rel: str) -> bytes:
    """A regular file's bytes; a link only to a regular file inside the workspace."""
    if path.is_symlink():
        target = path.resolve()
        if not target.is_relative_to(ws):
            raise SnapshotError(rel, f"links to {os.readlink(path)}, outside the workspace", "file-outside-workspace")
        path = target
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise SnapshotError(rel, f"cannot be read ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SnapshotError(rel, "is not a regular file (a FIFO, device or socket cannot be a source)")
        if st.st_size > MAX_FILE_BYTES:
            raise SnapshotError(rel, f"is larger than {MAX_FILE_BYTES >> 20} MiB")
        chunks, size = [], 0
        while size <= MAX_FILE_BYTES:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > MAX_FILE_BYTES:
            raise SnapshotError(rel, f"is larger than {MAX_FILE_BYTES >> 20} MiB")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _materialise(root: Path, contents: dict[str, bytes]) -> None:
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=root.parent))
    try:
        for rel, data in contents.items():
            p = tmp / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
            p.chmod(0o444)
        (tmp / MARKER).write_text("checked sources; see cuda_agent/languages/snapshot.py\n")
        try:
            os.rename(tmp, root)
        except OSError:  # another build made the identical copy first
            if not (root / MARKER).exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def touch(path: Path) -> None:
    try:
        os.utime(path)
    except OSError:
        pass


# ---- what the static checks saw, for the build that follows them -------------------------
_CHECKED: dict[str, tuple[str, float]] = {}
_LOCK = threading.Lock()
CHECK_VALID_S = 900.0  # a check older than this is not the one this build follows


def record_checked(workspace: str | Path, snapshot: Snapshot) -> None:
    with _LOCK:
        _CHECKED[str(Path(workspace).resolve())] = (snapshot.digest, time.monotonic())


def checked_digest(workspace: str | Path) -> str | None:
    """The digest the last recent check of `workspace` saw (consumed: one build per check)."""
    with _LOCK:
        got = _CHECKED.pop(str(Path(workspace).resolve()), None)
    if got is None or time.monotonic() - got[1] > CHECK_VALID_S:
        return None
    return got[0]


def checked_model_new(artifact: str | Path | None) -> Path | None:
    """The checked model_new.py that a build placed beside its artifact, or None where the
    language's artifact does not live in a snapshot."""
    if not artifact:
        return None
    here = Path(artifact).parent
    return here / "model_new.py" if (here / MARKER).is_file() else None
