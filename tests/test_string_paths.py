"""Module paths that live only in strings move with their modules: `_target_:` in the verl agent-loop
YAML, `pkg://` paths in the verl recipe and the docs, `python -m cuda_agent...` in scripts, imports in
generated code, and the source files and tests the docs name. Each must still point somewhere.

Records of past runs (`bench/results/`, `.json`, `.jsonl`, `.log`) keep the paths of their day and are
not read."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import subprocess
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ["README.md", "pyproject.toml", "configs", "docs", "bench", "scripts", "src"]
SUFFIXES = {".py", ".md", ".sh", ".yaml", ".yml", ".toml", ".txt", ".cfg", ".ini", ".html", ".js"}
RECORDS = {"results", "__pycache__"}

DOTTED = re.compile(r"(?<![\w./-])cuda_agent(?:\.[A-Za-z_]\w*)+")
PKG = re.compile(r"pkg://(cuda_agent[\w./]*\w)")
FILE = re.compile(r"(?<![\w./-])((?:src/cuda_agent|tests)/[\w./*-]*[\w*])")  # a glob too
NOT_PATHS = {"cuda_agent.pool_workers"}  # a key of the verl config's `cuda_agent` section, as the docs write it


def _scanned_files() -> list[Path]:
    """The project's own files: in a git checkout those git does not ignore (build outputs such as
    an egg-info's SOURCES.txt keep the paths of their day)."""
    try:
        listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "--", *SCANNED], cwd=ROOT,
                                capture_output=True, text=True, check=True).stdout.split("\n")
        candidates = [ROOT / name for name in listed if name]
    except (OSError, subprocess.CalledProcessError):
        candidates = [p for name in SCANNED for p in ([ROOT / name] if (ROOT / name).is_file() else (ROOT / name).rglob("*"))]
    return [p for p in candidates if p.is_file() and p.suffix in SUFFIXES and not RECORDS & set(p.relative_to(ROOT).parts)]


def _defined_names(origin: str) -> set[str]:
    """Top-level names a module's source binds (read, not imported: engines need not be installed)."""
    names: set[str] = set()
    body = list(ast.parse(Path(origin).read_text()).body)
    while body:
        node = body.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.If, ast.Try)):
            body += node.body + node.orelse + [s for h in getattr(node, "handlers", []) for s in h.body]
    return names


@cache
def _resolves(dotted: str) -> bool:
    """`a.b.c` is a module, or a module and a name it defines (`cuda_agent.train.verl.loop.CudaAgentLoop`)."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            spec = importlib.util.find_spec(".".join(parts[:i]))
        except ModuleNotFoundError:  # a parent is not a package
            spec = None
        if spec is not None:
            break
    else:
        return False
    rest = parts[i:]
    if not rest:
        return True
    if spec.origin and spec.origin.endswith(".py") and rest[0] in _defined_names(spec.origin):
        return True
    return hasattr(importlib.import_module(spec.name), rest[0])  # a lazy export, `__file__`, ...


def _string_paths() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in _scanned_files():
        text = path.read_text(errors="replace")
        where = path.relative_to(ROOT).as_posix()
        for m in DOTTED.finditer(text):
            found.setdefault(m.group(0), set()).add(where)
        for m in PKG.finditer(text):
            found.setdefault("pkg://" + m.group(1), set()).add(where)
        for m in FILE.finditer(text):
            if text[m.end():m.end() + 1] not in ("<", "{"):  # `tests/languages/<name>/` is a pattern, not a path
                found.setdefault(m.group(1), set()).add(where)
    return found


def _points_somewhere(path: str) -> bool:
    if path in NOT_PATHS:
        return True
    if path.startswith("pkg://"):  # verl's loader: `pkg://a.b.c` or `pkg://a/b/c`, a module
        return _resolves(path.removeprefix("pkg://").replace("/", "."))
    if "/" in path:
        return any(ROOT.glob(path)) if "*" in path else (ROOT / path).exists()
    return _resolves(path)


def test_every_module_path_in_a_string_points_somewhere():
    found = _string_paths()
    assert any(p.startswith("pkg://") for p in found) and "cuda_agent.train.verl.loop.CudaAgentLoop" in found
    stale = {p: sorted(where) for p, where in found.items() if not _points_somewhere(p)}
    assert not stale, "paths that point nowhere (moved modules?):\n" + "\n".join(
        f"  {p}  in {', '.join(w[:4])}" for p, w in sorted(stale.items()))


def test_the_check_can_fail():
    assert not _points_somewhere("cuda_agent.train.verl_loop.CudaAgentLoop")
    assert not _points_somewhere("cuda_agent.train.verl.loop.NoSuchLoop")
    assert not _points_somewhere("pkg://cuda_agent.train.verl_reward")
    assert not _points_somewhere("src/cuda_agent/train/verl_ckpt.py")
    assert _points_somewhere("pkg://cuda_agent/train/verl/reward") and _points_somewhere("cuda_agent.evaluate")
