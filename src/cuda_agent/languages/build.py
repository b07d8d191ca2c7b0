"""Compile a workspace's `kernels/` into one extension library, fast.

Why it is fast: raw kernel files never see a torch header; binding files include only
`binding_registry.h`, whose torch headers are precompiled once per machine (a gcc PCH);
every translation unit and the final link are content-addressed in a cache, so unchanged
sources cost a hash; units compile in parallel.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from pydantic import BaseModel, Field

from ..backends import Backend
from ..backends.base import digest, host_compiler
from ..isolation.paths import default_cache_dir
from .base import TEMPLATES_DIR


class BuildResult(BaseModel):
    ok: bool
    library: str | None = Field(default=None, description="path of the linked extension")
    log: str = Field(default="", description="compiler output trimmed to what fixes the error")
    seconds: float = 0.0
    compiled_units: int = 0
    cached_units: int = 0
    timed_out: bool = False


HEADER_SUFFIXES = (".h", ".hpp", ".cuh", ".inl")
FLAGS_LINE = re.compile(r"^\s*//\s*@flags:\s*(.*)$", re.MULTILINE)
MAX_LOG_LINES = 40
MAX_LOG_CHARS = 4000


class BuildError(Exception):
    """A unit failed to compile; `log` is the trimmed compiler output."""

    def __init__(self, log: str, timed_out: bool = False):
        super().__init__(log)
        self.log = log
        self.timed_out = timed_out


@dataclass(frozen=True)
class Layout:
    """How bindings are compiled and linked: the cpp language's (its `binding_registry.h`
    precompiled, the workspace compiled where it is) or another language's (the paper's pybind11
    registry: its own templates beside copies of kernels/, extra flags and libraries)."""

    name: str = "cpp"
    templates: Path = TEMPLATES_DIR  # binding.cpp and binding_registry.h; never the workspace's own
    host_flags: tuple[str, ...] = ()
    link_flags: tuple[str, ...] = ()
    library_name: str | None = None  # None: the backend's extension name + ".so"
    precompiled: bool = True  # the registry header as a PCH
    staged: bool = False  # compile copies of kernels/ beside `templates` ("../binding_registry.h" is ours)

    @property
    def salt(self) -> tuple[str, ...]:
        return () if self.name == "cpp" else (self.name,)


@dataclass(frozen=True)
class _Unit:
    source: Path
    kind: str  # "kernel" | "binding"
    key: str
    flags: tuple[str, ...]


def build_workspace(
    workspace: str | Path,
    backend: Backend,
    *,
    cache_dir: Path | None = None,
    timeout_s: float = 300.0,
    jobs: int | None = None,
    layout: Layout = Layout(),
) -> BuildResult:
    """Build `workspace/kernels` for `backend`. Never raises for bad candidate code: a
    failure is a BuildResult with ok=False and a log a model can act on."""
    cache = (cache_dir or default_cache_dir()).resolve()
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    try:
        with _sources(Path(workspace).resolve(), layout, cache) as ws:
            units = _plan_units(ws, backend, layout)
            pch_dir = ensure_pch(backend, cache, deadline) if layout.precompiled else None
            objects, compiled = _compile_all(units, backend, cache, pch_dir, ws, deadline, jobs, layout)
            text = "\n".join(u.source.read_text(errors="replace") for u in units if u.source.parent == ws / "kernels")
            library = _link(objects, backend, cache, [*backend.optional_libraries(text), *layout.link_flags],
                            ws, deadline, layout.library_name or f"{backend.extension_name}.so")
    except BuildError as exc:
        return BuildResult(ok=False, log=exc.log, seconds=time.monotonic() - t0, timed_out=exc.timed_out)
    return BuildResult(ok=True, library=str(library), seconds=time.monotonic() - t0,
                       compiled_units=compiled, cached_units=len(units) - compiled)


def publish_library(library: str | None, dest: Path) -> None:
    """Copy the built library to `dest`, where the workspace's own loader or scripts look for it."""
    if not library:
        return
    try:
        dest.parent.mkdir(exist_ok=True)
        tmp = dest.with_suffix(f".tmp{os.getpid()}")
        shutil.copyfile(library, tmp)
        os.replace(tmp, dest)
    except OSError:
        pass  # only the agent's convenience copy; the evaluation uses the cached library


# ---- planning -------------------------------------------------------------------------
@contextmanager
def _sources(ws: Path, layout: Layout, cache: Path) -> Iterator[Path]:
    """The root to compile from: the workspace, or for a staged layout a copy of its kernels/
    beside the layout's own binding.cpp and binding_registry.h."""
    if not layout.staged:
        yield ws
        return
    kernels = ws / "kernels"
    if not kernels.is_dir():
        raise BuildError("no kernels/ directory in the workspace")
    (cache / "stage").mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f"{layout.name}-", dir=cache / "stage"))
    try:
        (stage / "kernels").mkdir()
        for p in kernels.iterdir():
            if p.is_file():
                shutil.copyfile(p, stage / "kernels" / p.name)
        for fixed in ("binding_registry.h", "binding.cpp"):
            shutil.copyfile(layout.templates / fixed, stage / fixed)
        yield stage
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _plan_units(ws: Path, backend: Backend, layout: Layout) -> list[_Unit]:
    kernels = ws / "kernels"
    if not kernels.is_dir():
        raise BuildError("no kernels/ directory in the workspace")
    files = sorted(p for p in kernels.iterdir() if p.is_file())
    headers = b"".join(p.name.encode() + p.read_bytes() for p in files if p.suffix in HEADER_SUFFIXES)
    bindings = [p for p in files if p.name.endswith(backend.binding_suffix)]
    sources = [p for p in files if p.suffix == backend.kernel_suffix and p not in bindings]
    if not bindings:
        raise BuildError(f"no kernels/*{backend.binding_suffix} file: nothing would be registered")
    stray = [p.name for p in files if p.suffix in {".cu", ".cpp", ".cc", ".c"} and p not in bindings + sources]
    if stray:
        raise BuildError(f"files not built by the {backend.name} backend: {', '.join(stray)} "
                         f"(kernels must end in {backend.kernel_suffix}, bindings in {backend.binding_suffix})")
    toolchain = backend.toolchain_id()
    units = []
    for src in sources:
        flags = _requested_flags(src, backend)
        key = digest("kernel", *layout.salt, toolchain, " ".join(flags), src.read_bytes(), headers)
        units.append(_Unit(src, "kernel", key, tuple(flags)))
    host = " ".join([*backend.host_flags(), *layout.host_flags])
    fixed = (ws if layout.staged else layout.templates) / "binding.cpp"
    registry = (layout.templates / "binding_registry.h").read_bytes()
    for src in [fixed, *bindings]:
        key = digest("binding", *layout.salt, toolchain, host, src.read_bytes(), headers, registry)
        units.append(_Unit(src, "binding", key, ()))
    return units


def _requested_flags(src: Path, backend: Backend) -> list[str]:
    """Flags a kernel asks for with `// @flags: ...`; anything off the allow-list fails."""
    flags: list[str] = []
    for match in FLAGS_LINE.finditer(src.read_text(errors="replace")):
        for flag in match.group(1).split():
            if flag not in backend.allowed_kernel_flags:
                allowed = " ".join(sorted(backend.allowed_kernel_flags))
                raise BuildError(f"kernels/{src.name}: flag {flag!r} is not allowed (allowed: {allowed})")
            flags.append(flag)
    return flags


# ---- precompiled header -------------------------------------------------------------------
def ensure_pch(backend: Backend, cache: Path, deadline: float) -> Path:
    """Directory holding binding_registry.h and its .gch, built once per toolchain."""
    header = TEMPLATES_DIR / "binding_registry.h"
    key = digest("pch", backend.toolchain_id(), " ".join(backend.host_flags()), header.read_bytes())
    pch_dir = cache / "pch" / key[:24]
    gch = pch_dir / "binding_registry.h.gch"
    if gch.exists():
        return pch_dir
    pch_dir.mkdir(parents=True, exist_ok=True)
    with open(pch_dir / ".lock", "w") as lock:  # closing it drops the flock
        fcntl.flock(lock, fcntl.LOCK_EX)
        if gch.exists():
            return pch_dir
        shutil.copy2(header, pch_dir / "binding_registry.h")
        shutil.copy2(TEMPLATES_DIR / "binding.cpp", pch_dir / "binding.cpp")
        tmp = pch_dir / f".tmp{os.getpid()}.gch"
        cmd = [host_compiler(), *backend.host_flags(), "-x", "c++-header",
               str(pch_dir / "binding_registry.h"), "-o", str(tmp)]
        _run(cmd, deadline, pch_dir)
        os.replace(tmp, gch)
    return pch_dir


# ---- compile + link -----------------------------------------------------------------------
def _compile_all(units: list[_Unit], backend: Backend, cache: Path, pch_dir: Path | None, ws: Path,
                 deadline: float, jobs: int | None, layout: Layout) -> tuple[list[Path], int]:
    obj_dir = cache / "objects"
    obj_dir.mkdir(parents=True, exist_ok=True)
    todo = [u for u in units if not (obj_dir / f"{u.key}.o").exists()]

    def compile_one(unit: _Unit) -> None:
        out = obj_dir / f"{unit.key}.o"
        with tempfile.TemporaryDirectory(dir=obj_dir) as tmp:
            tmp_obj = Path(tmp) / "unit.o"
            if unit.kind == "kernel":
                cmd = backend.kernel_compile_cmd(unit.source, tmp_obj, list(unit.flags))
            else:
                # the fixed entry point compiles from its copy beside the PCH, so it uses it too
                src = pch_dir / unit.source.name if pch_dir and unit.source.parent == TEMPLATES_DIR else unit.source
                pch = ["-Winvalid-pch", f"-I{pch_dir}"] if pch_dir else []
                cmd = [host_compiler(), *backend.host_flags(), *layout.host_flags, *pch,
                       f"-I{ws / 'kernels'}", "-c", str(src), "-o", str(tmp_obj)]
            _run(cmd, deadline, ws)
            os.replace(tmp_obj, out)

    if todo:
        workers = max(1, min(len(todo), jobs or os.cpu_count() or 2))
        with ThreadPoolExecutor(workers) as pool:
            errors = [f.exception() for f in [pool.submit(compile_one, u) for u in todo]]
        failures = [e for e in errors if e is not None]
        for e in failures:
            if not isinstance(e, BuildError):
                raise e
        if failures:
            raise BuildError("\n".join(e.log for e in failures)[:MAX_LOG_CHARS * 2],
                             timed_out=any(e.timed_out for e in failures))
    return [obj_dir / f"{u.key}.o" for u in units], len(todo)


def _link(objects: list[Path], backend: Backend, cache: Path, libraries: list[str], ws: Path,
          deadline: float, name: str) -> Path:
    key = digest("link", backend.toolchain_id(), " ".join(libraries), *[o.name for o in objects])
    lib_dir = cache / "libraries" / key[:32]
    library = lib_dir / name
    if not library.exists():
        lib_dir.mkdir(parents=True, exist_ok=True)
        tmp = lib_dir / f".tmp{os.getpid()}-{threading.get_ident()}.so"  # unique per thread: builds run in threads
        _run(backend.link_cmd(objects, tmp, libraries), deadline, ws)
        os.replace(tmp, library)
    return library


def _run(cmd: list[str], deadline: float, ws: Path) -> None:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise BuildError("build timed out", timed_out=True)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=remaining,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise BuildError(f"build timed out (limit reached while running {Path(cmd[0]).name})",
                         timed_out=True) from None
    except FileNotFoundError:
        raise BuildError(f"compiler not found: {cmd[0]}") from None
    if proc.returncode != 0:
        raise BuildError(trim_compiler_output(proc.stdout + proc.stderr, ws) or
                         f"{Path(cmd[0]).name} exited with status {proc.returncode}")


# ---- error trimming -----------------------------------------------------------------------
_NOISE = re.compile(
    r"(In instantiation of|required from|required by substitution|In file included from|"
    r"^\s+from |note: candidate|note: +template argument|compilation terminated|"
    r"^\d+ errors? detected in the compilation|In member function|In function )"
)
_ERROR = re.compile(r"\b(error|fatal error|undefined reference)\b", re.IGNORECASE)


def trim_compiler_output(output: str, ws: Path) -> str:
    """Keep each error with a little context, drop template backtraces and include chains,
    shorten paths to workspace-relative ones, and cap the length (saying what was cut)."""
    text = output.replace(str(ws) + "/", "")
    kept: list[str] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if _NOISE.search(line):
            continue
        if _ERROR.search(line):
            kept.append(line)
            # the source line and caret gcc/nvcc print right after an error
            kept.extend(ln for ln in lines[i + 1:i + 3] if ln.startswith((" ", "|", "\t")) and not _ERROR.search(ln))
    if not kept:
        kept = [ln for ln in lines if not _NOISE.search(ln)][-MAX_LOG_LINES:]
    cut = max(0, len(kept) - MAX_LOG_LINES)
    out = "\n".join(kept[:MAX_LOG_LINES])
    if len(out) > MAX_LOG_CHARS:
        out = out[:MAX_LOG_CHARS] + f"\n[... {len(out) - MAX_LOG_CHARS} more characters cut]"
    elif cut:
        out += f"\n[... {cut} more lines cut]"
    return out

