"""Materialise a workspace from a Task, and detect tampering with its fixed files.

The files are the language's (`docs/languages.md`). Fixed files are made read-only and their
hashes recorded twice: in the workspace (for the tools) and outside it, in the cache, where the
agent cannot edit the record it would be checked against.
"""

from __future__ import annotations

import hashlib
import stat
from pathlib import Path

from pydantic import BaseModel

from ..tasks import Task
from ..isolation.paths import default_cache_dir
from ..storage import atomic_write

META_DIR = ".cuda_agent"
META_FILE = f"{META_DIR}/workspace.json"


class WorkspaceError(ValueError):
    pass


class Workspace(BaseModel):
    """A materialised workspace: where it is, what task it holds, what must not change."""

    root: Path
    task: Task
    backend: str
    manifest: dict[str, str]
    language: str = "cpp"

    @property
    def fixed_files(self) -> list[str]:
        return sorted(self.manifest)

    def tampered_files(self) -> list[str]:
        """Fixed files whose content differs from the recorded hash (or that are gone)."""
        changed = []
        for rel, expected in self.manifest.items():
            path = self.root / rel
            if not path.is_file() or _sha256(path.read_bytes()) != expected:
                changed.append(rel)
        return changed


def create_workspace(task: Task, directory: str | Path, backend: str, *, cache_dir: Path | None = None,
                     overwrite: bool = False, language: str = "cpp", rules: str = "paper") -> Workspace:
    """Lay out a fresh workspace for `task` in `directory`, in `language` (see languages/);
    `rules`: the rules profile its SKILL.md states (`paper` / `strict`, languages/cpp/vendor.py)."""
    from ..backends import get_backend
    from ..languages import get_language

    get_backend(backend)
    lang = get_language(language)
    lang.check_backend(backend)
    root = Path(directory).resolve()
    if root.exists() and any(root.iterdir()):
        if not overwrite:
            raise WorkspaceError(f"{root} exists and is not empty (pass overwrite=True / --force)")
        _make_writable(root)
    (root / "kernels").mkdir(parents=True, exist_ok=True)
    (root / META_DIR).mkdir(exist_ok=True)

    fixed = lang.fixed_files(task, backend, rules)
    manifest = {rel: _sha256(text.encode()) for rel, text in fixed.items()}
    ws = Workspace(root=root, task=task, backend=backend, manifest=manifest, language=language)
    _write_fixed(root, {**fixed, META_FILE: _agent_copy(ws)})
    for rel, text in lang.starter_files(task, backend).items():
        path = root / rel
        if overwrite or not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    _record_outside(ws, cache_dir)
    return ws


def adopt_workspace(directory: str | Path, task: Task, backend: str, language: str, *,
                    cache_dir: Path | None = None) -> Workspace:
    """Take an existing directory laid out for `language` (e.g. the paper's agent_workdir) as
    a workspace as it is: its fixed files are hashed as found and recorded outside it."""
    from ..languages import get_language

    lang = get_language(language)
    lang.check_backend(backend)
    root = Path(directory).resolve()
    expected = list(lang.adoptable_files() or lang.fixed_files(task, backend))
    missing = [rel for rel in expected if rel != "model.py" and not (root / rel).is_file()]
    expected.append("model.py")
    if missing or not (root / "model_new.py").is_file() or not (root / "kernels").is_dir():
        raise WorkspaceError(f"{root} is not a {language} workspace: missing "
                             f"{', '.join(missing or ['model_new.py or kernels/'])}")
    manifest = {rel: _sha256((root / rel).read_bytes()) for rel in expected if (root / rel).is_file()}
    ws = Workspace(root=root, task=task, backend=backend, manifest=manifest, language=language)
    (root / META_DIR).mkdir(exist_ok=True)
    (root / META_FILE).write_text(_agent_copy(ws))
    _record_outside(ws, cache_dir)
    return ws


def _write_fixed(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            path.chmod(0o644)
        path.write_text(text)
        path.chmod(0o555 if rel.endswith(".sh") else 0o444)


def open_workspace(directory: str | Path, *, cache_dir: Path | None = None) -> Workspace:
    """Read a workspace's record; prefer the copy kept outside the workspace (the trusted one)."""
    root = Path(directory).resolve()
    trusted = _outside_record(root, cache_dir)
    if trusted.is_file():
        return Workspace.model_validate_json(trusted.read_text())
    meta = root / META_FILE
    if not meta.is_file():
        raise WorkspaceError(f"{root} is not a cuda-agent workspace (no {META_FILE}); "
                             "create one with `cuda-agent workspace TASK DIR`")
    ws = Workspace.model_validate_json(meta.read_text())
    return ws.model_copy(update={"root": root})


# ---- pieces ---------------------------------------------------------------------------------
def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _outside_record(root: Path, cache_dir: Path | None) -> Path:
    key = hashlib.sha256(str(root).encode()).hexdigest()[:32]
    return (cache_dir or default_cache_dir()) / "workspaces" / f"{key}.json"


def _agent_copy(ws: Workspace) -> str:
    """The record inside the workspace, which the agent can read: without held-out workloads
    (the trusted copy outside keeps them, so every evaluation still checks them)."""
    return ws.model_copy(update={"task": ws.task.for_agent()}).model_dump_json(indent=1)


def _record_outside(ws: Workspace, cache_dir: Path | None) -> None:
    atomic_write(_outside_record(ws.root, cache_dir), ws.model_dump_json(indent=1))


def _make_writable(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        try:
            path.chmod(path.stat().st_mode | stat.S_IWUSR)
        except OSError:
            pass
