"""Compile a workspace's `kernels/` into one extension library, fast.

Why it is fast: raw kernel files never see a torch header; binding files include only
`binding_registry.h`, whose torch headers are precompiled once per machine (a gcc PCH);
every translation unit and the final link are content-addressed in a cache, so unchanged
sources cost a hash; units compile in parallel.

Why it is safe (docs/guards.md, "The build"): it compiles a snapshot of the checked bytes
(`snapshot.py`), never the workspace; a unit's key covers every byte that unit may read (itself,
every kernels/ file that is not another translation unit, the names of all files, the fixed
files, the toolchain), and the compiler is confined to exactly those plus the toolchain
(`isolation/sandboxed_exec.py`: Landlock reads and writes, no network, memory, CPU and
file-size limits), so a host file can neither reach an error message nor an object; the static
scan preprocesses with the very same command, directory and confinement; the cache is pruned
to a size bound; the agent's copy of the library is written without following links.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ...backends import Backend
from ...backends.base import digest, host_compiler
from ...isolation.paths import default_cache_dir
from ..records import BuildResult
from ..snapshot import Snapshot, SnapshotError, checked_digest, take_snapshot, touch
from . import TEMPLATES_DIR


FLAGS_LINE = re.compile(r"^\s*//\s*@flags:\s*(.*)$", re.MULTILINE)
MAX_LOG_LINES = 40
MAX_LOG_CHARS = 4000
_WRAPPER = str(Path(__file__).resolve().parents[2] / "isolation" / "sandboxed_exec.py")
_READ_LOG_BYTES = 1 << 20


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def build_limits() -> dict[str, int]:
    """Per compiler process: address space, largest file it may write (objects, logs)."""
    return {"memory_bytes": _env_int("CUDA_AGENT_BUILD_MEMORY_MB", 8192) << 20,
            "file_bytes": _env_int("CUDA_AGENT_BUILD_FILE_MB", 256) << 20}


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

    @property
    def salt(self) -> tuple[str, ...]:
        return () if self.name == "cpp" else (self.name,)


@dataclass(frozen=True)
class _Unit:
    source: Path
    kind: str  # "kernel" | "binding" | "fixed" (the entry point: reads nothing of the candidate's)
    key: str
    flags: tuple[str, ...]
    reads: tuple[Path, ...]  # the snapshot files this unit may read (all of them are in `key`)


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
        snap = snapshot_for_build(workspace, cache, layout)
        units = _plan_units(snap, backend, layout)
        pch_dir = ensure_pch(backend, cache, deadline) if layout.precompiled else None
        objects, compiled = _compile_all(units, backend, cache, pch_dir, snap, deadline, jobs, layout)
        text = "\n".join(u.source.read_text(errors="replace") for u in units if u.source.parent == snap.kernels)
        library = _link(objects, backend, cache, [*backend.optional_libraries(text), *layout.link_flags],
                        snap, deadline, layout.library_name or f"{backend.extension_name}.so")
        library = _beside_sources(library, snap)
    except BuildError as exc:
        return BuildResult(ok=False, log=exc.log, seconds=time.monotonic() - t0, timed_out=exc.timed_out)
    if compiled:
        prune_cache(cache, keep={snap.root, library.resolve().parent, *objects})
    return BuildResult(ok=True, library=str(library), seconds=time.monotonic() - t0,
                       compiled_units=compiled, cached_units=len(units) - compiled)


def snapshot_for_build(workspace: str | Path, cache: Path, layout: Layout = Layout()) -> Snapshot:
    """The snapshot to build: the bytes the static checks saw when they ran just before."""
    ws = Path(workspace).resolve()
    try:
        snap = take_snapshot(ws, cache, layout.templates)
    except SnapshotError as exc:
        raise BuildError(f"{exc.file}: {exc.message}") from None
    expected = checked_digest(ws)
    if expected is not None and expected != snap.digest:
        raise BuildError("model_new.py or kernels/ changed after the static checks read them (something wrote to "
                         "the workspace during the evaluation); nothing unchecked is built: evaluate again")
    return snap


def publish_library(library: str | None, dest: Path) -> None:
    """Copy the built library to `dest`, where the workspace's own loader or scripts look for it.
    The workspace is the candidate's: `dest`'s folder is opened without following links (a
    `build/` link out of the workspace gets nothing), the copy is created exclusively and renamed
    within that folder, so nothing is written through a path the candidate controls."""
    if not library:
        return
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        parent_fd = os.open(dest.parent.parent, flags)
    except OSError:
        return
    dir_fd = None
    try:
        try:
            os.mkdir(dest.parent.name, 0o755, dir_fd=parent_fd)
        except FileExistsError:
            pass
        dir_fd = os.open(dest.parent.name, flags, dir_fd=parent_fd)  # a link here: ELOOP / ENOTDIR
        tmp = f".{dest.name}.tmp{os.getpid()}-{threading.get_ident()}"
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o755, dir_fd=dir_fd)
        try:
            with open(library, "rb") as src, os.fdopen(out, "wb", closefd=False) as fh:
                shutil.copyfileobj(src, fh)
        finally:
            os.close(out)
        os.replace(tmp, dest.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)  # replaces a link, never follows it
    except OSError:
        pass  # only the agent's convenience copy; the evaluation uses the cached library
    finally:
        for fd in (dir_fd, parent_fd):
            if fd is not None:
                os.close(fd)


# ---- planning -------------------------------------------------------------------------
def _plan_units(snap: Snapshot, backend: Backend, layout: Layout, strict: bool = True) -> list[_Unit]:
    """The translation units and their keys. `strict=False` (the scan): every unit that can be
    planned, without the build's refusals (no binding, stray files, a refused flag)."""
    kernels = snap.kernels
    if not kernels.is_dir():
        raise BuildError("no kernels/ directory in the workspace")
    files = [snap.root / rel for rel in snap.files]
    top = [p for p in files if p.parent == kernels]
    bindings = [p for p in top if p.name.endswith(backend.binding_suffix)]
    sources = [p for p in top if p.suffix == backend.kernel_suffix and p not in bindings]
    if not bindings and strict:
        raise BuildError(f"no kernels/*{backend.binding_suffix} file: nothing would be registered")
    stray = [p.name for p in top if p.suffix in {".cu", ".cpp", ".cc", ".c"} and p not in bindings + sources]
    if stray and strict:
        raise BuildError(f"files not built by the {backend.name} backend: {', '.join(stray)} "
                         f"(kernels must end in {backend.kernel_suffix}, bindings in {backend.binding_suffix})")
    # what any unit may read besides itself: every kernels/ file that is not another unit, the
    # fixed files, and the names of all files (`__has_include` sees existence): all in the key
    units_set = set(bindings + sources)
    shared = [p for p in files if p not in units_set] + [snap.root / name for name in ("binding.cpp", "binding_registry.h")]
    shared_key = digest("shared", *snap.files, *[f"{p.relative_to(snap.root)}\0".encode() + p.read_bytes() for p in shared])
    toolchain = backend.toolchain_id()
    units = []
    for src in sources:
        try:
            flags = _requested_flags(src, backend)
        except BuildError:
            if strict:
                raise
            continue  # the build refuses it anyway
        key = digest("kernel", *layout.salt, toolchain, " ".join(flags), src.name, src.read_bytes(), shared_key)
        units.append(_Unit(src, "kernel", key, tuple(flags), (src, *shared)))
    host = " ".join([*backend.host_flags(), *layout.host_flags])
    registry = (layout.templates / "binding_registry.h").read_bytes()
    fixed = snap.root / "binding.cpp"
    key = digest("binding", *layout.salt, toolchain, host, fixed.read_bytes(), registry)
    units.append(_Unit(fixed, "fixed", key, (), (fixed, snap.root / "binding_registry.h")))
    for src in bindings:
        key = digest("binding", *layout.salt, toolchain, host, src.name, src.read_bytes(), shared_key, registry)
        units.append(_Unit(src, "binding", key, (), (src, *shared)))
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
        _run_trusted(cmd, deadline, pch_dir)
        os.replace(tmp, gch)
    return pch_dir


# ---- compile + link -----------------------------------------------------------------------
def unit_command(unit: _Unit, backend: Backend, layout: Layout, pch_dir: Path | None, snap: Snapshot,
                 obj: Path | None) -> list[list[str]]:
    """The compile command of `unit` (`obj` given), or the preprocessor command(s) it amounts
    to (`obj` None): one function for both, so the scan reads what the build compiles."""
    if unit.kind == "kernel":
        if obj is None:
            return backend.preprocess_cmds(unit.source, list(unit.flags))
        return [backend.kernel_compile_cmd(unit.source, obj, list(unit.flags))]
    # the fixed entry point compiles from its copy beside the PCH, so it uses it too
    src = pch_dir / unit.source.name if pch_dir and unit.kind == "fixed" else unit.source
    pch = ["-Winvalid-pch", f"-I{pch_dir}"] if pch_dir else []
    inc = [] if unit.kind == "fixed" else [f"-I{snap.kernels}"]
    tail = ["-c", str(src), "-o", str(obj)] if obj is not None else (["-fpch-preprocess"] if pch_dir else []) + ["-E", str(src)]
    return [[host_compiler(), *backend.host_flags(), *layout.host_flags, *pch, *inc, *tail]]


def _compile_all(units: list[_Unit], backend: Backend, cache: Path, pch_dir: Path | None, snap: Snapshot,
                 deadline: float, jobs: int | None, layout: Layout) -> tuple[list[Path], int]:
    obj_dir = cache / "objects"
    obj_dir.mkdir(parents=True, exist_ok=True)
    todo = [u for u in units if not (obj_dir / f"{u.key}.o").exists()]
    for u in units:
        if u not in todo:
            touch(obj_dir / f"{u.key}.o")

    def compile_one(unit: _Unit) -> None:
        out = obj_dir / f"{unit.key}.o"
        with tempfile.TemporaryDirectory(dir=obj_dir) as tmp:
            tmp_obj = Path(tmp) / "unit.o"
            cmd = unit_command(unit, backend, layout, pch_dir, snap, tmp_obj)[0]
            run_confined(cmd, deadline, snap, Path(tmp), reads=[*unit.reads, *([pch_dir] if pch_dir else [])])
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


def _link(objects: list[Path], backend: Backend, cache: Path, libraries: list[str], snap: Snapshot,
          deadline: float, name: str) -> Path:
    key = digest("link", backend.toolchain_id(), " ".join(libraries), *[o.name for o in objects])
    lib_dir = cache / "libraries" / key[:32]
    library = lib_dir / name
    if library.exists():
        touch(lib_dir)
        return library
    lib_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=lib_dir) as tmp:
        pinned = [_pinned(o, Path(tmp) / f"{i}-{o.name}") for i, o in enumerate(objects)]
        out = Path(tmp) / name
        run_confined(backend.link_cmd(pinned, out, libraries), deadline, snap, Path(tmp), reads=pinned)
        os.replace(out, library)
    return library


def _pinned(obj: Path, at: Path) -> Path:
    """`obj` as it is now, at `at` (a hard link, else a copy). A read rule of the link's sandbox
    binds to a file's inode when it is made, and a build of the same unit elsewhere (identical
    sources: every reference solution of a benchmark run) replaces the cache's name with a new
    inode: the linker then found its object unreadable, "ld returned 1" for honest code (issue 23,
    seventh session, level3/21_EfficientNetMBConv; 1 in 12 of four concurrent builds on the CPU)."""
    try:
        os.link(obj, at)
    except OSError:
        try:
            shutil.copyfile(obj, at)
        except OSError as exc:  # a full disk, an object pruned meanwhile: a failed build, said as one
            raise BuildError(f"the link could not take its object {obj.name}: {exc.strerror or exc}") from None
    return at


def _beside_sources(library: Path, snap: Snapshot) -> Path:
    """The library as a file in the snapshot, beside the checked model_new.py the candidate
    imports with it (a hard link: no copy)."""
    dest = snap.root / library.name
    if dest.exists():
        return dest
    tmp = snap.root / f".{library.name}.tmp{os.getpid()}-{threading.get_ident()}"
    try:
        os.link(library, tmp)
    except OSError:
        shutil.copyfile(library, tmp)
    os.replace(tmp, dest)
    return dest


def _run_trusted(cmd: list[str], deadline: float, cwd: Path) -> None:
    """Our own header through the compiler (the PCH): nothing of a candidate's is read."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise BuildError("build timed out", timed_out=True)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=remaining, stdin=subprocess.DEVNULL, cwd=cwd)
    except subprocess.TimeoutExpired:
        raise BuildError(f"build timed out (limit reached while running {Path(cmd[0]).name})", timed_out=True) from None
    except FileNotFoundError:
        raise BuildError(f"compiler not found: {cmd[0]}") from None
    if proc.returncode != 0:
        raise BuildError(trim_compiler_output(proc.stdout + proc.stderr, cwd) or
                         f"{Path(cmd[0]).name} exited with status {proc.returncode}")


# ---- the confined toolchain ---------------------------------------------------------------
_SYSTEM_READ = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc/ld.so.cache",
                "/etc/alternatives")
_PATH_FLAGS = ("-I", "-isystem", "-L", "-B", "-ccbin=", "--compiler-bindir=", "-Wl,-rpath,")


def toolchain_paths(cmd: list[str], snap: Snapshot | None = None) -> list[Path]:
    """What a toolchain command may read: the system's toolchain, Python's and torch's trees,
    the program's own install tree and every include / library dir the command names (we
    write those; a kernel's `// @flags:` cannot add one), never anything inside the snapshot."""
    paths = {Path(p) for p in _SYSTEM_READ}
    paths |= {Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix)}
    prog = shutil.which(cmd[0])
    if prog:
        real = Path(prog).resolve()
        paths |= {Path(prog).parent, real.parent, real.parent.parent}
    for arg in cmd[1:]:
        for flag in _PATH_FLAGS:
            if arg.startswith(flag) and len(arg) > len(flag):
                p = Path(arg[len(flag):])
                if p.is_absolute():
                    paths.add(p)
                    if flag in ("-ccbin=", "--compiler-bindir="):
                        prog = shutil.which(str(p))
                        if prog:
                            paths |= {Path(prog).resolve().parent, Path(prog).resolve().parent.parent}
    if snap is not None:
        paths = {p for p in paths if not p.resolve().is_relative_to(snap.root.resolve())}
    return sorted(p for p in paths if p != Path("/") and p.exists())


def run_confined(cmd: list[str], deadline: float, snap: Snapshot, scratch: Path, *, reads: list[Path],
                 stdout_to: Path | None = None, limits: dict[str, int] | None = None) -> None:
    """Run one toolchain command on the snapshot: working directory its root, reading only the
    toolchain and `reads`, writing only `scratch` (also its TMPDIR), with memory, CPU and
    file-size limits; raise BuildError with the trimmed log on failure. `stdout_to`: keep the
    command's output there (the scan's preprocessed text); `limits`: `build_limits` keys set
    lower than the build's (the scan's bounds on that text and its memory)."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise BuildError("build timed out", timed_out=True)
    if shutil.which(cmd[0]) is None:
        raise BuildError(f"compiler not found: {cmd[0]}")
    listable = [snap.root, *sorted({p.parent for p in reads if p.is_relative_to(snap.root)})]
    spec = {"read": [str(p) for p in [*toolchain_paths(cmd, snap), *reads]], "list": [str(p) for p in listable],
            "write": [str(scratch), "/dev/null"], "cpu_seconds": int(remaining) + 5,
            "require_seccomp": _seccomp_ok(), **build_limits(), **(limits or {})}
    argv = [sys.executable, "-I", "-S", _WRAPPER, json.dumps(spec), "--", *cmd] if _landlock_ok() else cmd
    env = {k: v for k, v in os.environ.items() if k in _BUILD_ENV}
    env.update({"TMPDIR": str(scratch), "HOME": str(scratch)})
    out_path = stdout_to or scratch / ".stdout"
    err_path = scratch / ".stderr"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=snap.root,
                                    env=env, start_new_session=True)
        except OSError as exc:
            raise BuildError(f"cannot run {Path(cmd[0]).name}: {exc.strerror}") from None
        try:
            rc = proc.wait(timeout=remaining)
        except subprocess.TimeoutExpired:
            raise BuildError(f"build timed out (limit reached while running {Path(cmd[0]).name})",
                             timed_out=True) from None
        finally:
            _kill_group(proc)  # the compiler when it timed out, and anything it left running
    if rc == 0:
        return
    text = _head(err_path) + ("" if stdout_to else _head(out_path))
    if rc == 125 and "build sandbox could not be applied" in text:
        raise BuildError(f"infrastructure: {text.strip()}")
    signame = _signal_name(rc)
    if signame in ("SIGXFSZ",):
        text += f"\n{Path(cmd[0]).name}: output over the {build_limits()['file_bytes'] >> 20} MiB build file limit"
    elif signame in ("SIGXCPU", "SIGKILL"):
        text += f"\n{Path(cmd[0]).name}: killed ({signame}: CPU time or memory limit of the build)"
    raise BuildError(trim_compiler_output(text, snap.root) or f"{Path(cmd[0]).name} exited with status {rc}")


_BUILD_ENV = frozenset({"PATH", "LANG", "LC_ALL", "LC_CTYPE", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "CC",
                        "CXX", "CUDA_AGENT_CUDA_ARCH", "SOURCE_DATE_EPOCH"})


def _head(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            data = fh.read(_READ_LOG_BYTES + 1)
    except OSError:
        return ""
    cut = "\n[... output cut]" if len(data) > _READ_LOG_BYTES else ""
    return data[:_READ_LOG_BYTES].decode(errors="replace") + cut


def _signal_name(rc: int) -> str | None:
    n = -rc if rc < 0 else (rc - 128 if rc > 128 else 0)
    try:
        return signal.Signals(n).name if n else None
    except ValueError:
        return None


def _kill_group(proc: subprocess.Popen) -> None:
    """Everything the toolchain started, then reaped (isolation's one kill, and a bounded wait)."""
    from ...isolation.worker import kill_tree

    kill_tree(proc)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


_probe_lock = threading.Lock()


def _landlock_ok() -> bool:
    """Builds are confined where the kernel has Landlock; `CUDA_AGENT_BUILD_SANDBOX=off` is for
    hosts without it (then only the static checks stand between a build and the host's files)."""
    if os.environ.get("CUDA_AGENT_BUILD_SANDBOX", "auto") == "off":
        return False
    from ...isolation.sandbox import landlock_abi

    return landlock_abi() >= 1


def _seccomp_ok() -> bool:
    from ...isolation.sandbox import seccomp_supported

    with _probe_lock:
        return seccomp_supported()


# ---- the cache's size ---------------------------------------------------------------------
def prune_cache(cache: Path, *, keep: set[Path] = frozenset(), max_bytes: int | None = None,  # type: ignore[assignment]
                min_age_s: float | None = None) -> int:
    """Delete the least recently used objects, libraries and snapshots until the cache is under
    `max_bytes` (`CUDA_AGENT_BUILD_CACHE_MB`, default 4096); never `keep` nor anything used in the
    last `min_age_s` (`CUDA_AGENT_BUILD_CACHE_MIN_AGE_S`, default 300: another evaluation's build
    may be about to load it). Returns the bytes removed. One pruner at a time per cache."""
    max_bytes = max_bytes if max_bytes is not None else _env_int("CUDA_AGENT_BUILD_CACHE_MB", 4096) << 20
    min_age_s = min_age_s if min_age_s is not None else float(_env_int("CUDA_AGENT_BUILD_CACHE_MIN_AGE_S", 300))
    keep = {Path(p) for p in keep}
    try:
        lock = open(cache / ".prune.lock", "w")
    except OSError:
        return 0
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return 0  # another process is pruning
        entries: list[tuple[float, int, Path]] = []
        for sub in ("objects", "libraries", "sources"):
            base = cache / sub
            if not base.is_dir():
                continue
            for e in os.scandir(base):
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                size = _tree_size(Path(e.path)) if e.is_dir(follow_symlinks=False) else st.st_size
                entries.append((st.st_mtime, size, Path(e.path)))
        total = sum(size for _, size, _ in entries)
        removed = 0
        now = time.time()
        for mtime, size, path in sorted(entries, key=lambda t: t[0]):
            if total - removed <= max_bytes:
                break
            if path in keep or now - mtime < min_age_s:
                continue
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    path.unlink()
                except OSError:
                    continue
            removed += size
        return removed


def _tree_size(path: Path) -> int:
    total = 0
    for dirpath, _, names in os.walk(path):
        for n in names:
            try:
                total += os.lstat(os.path.join(dirpath, n)).st_blocks * 512
            except OSError:
                pass
    return total


# ---- error trimming -----------------------------------------------------------------------
_NOISE = re.compile(
    r"(In instantiation of|required from|required by substitution|In file included from|"
    r"^\s+from |note: candidate|note: +template argument|compilation terminated|"
    r"^\d+ errors? detected in the compilation|In member function|In function )"
)
_ERROR = re.compile(r"\b(error|fatal error|undefined reference)\b", re.IGNORECASE)
# a diagnostic's place: gcc's `file:line[:col]:`, nvcc's `file(line):`
_PLACE = re.compile(r"^(?P<file>[^\s:(][^:(]*?)(?::\d+(?::\d+)?:|\(\d+\):)(?P<message>.*)$")
_QUOTED = re.compile(r"‘[^’\n]*’|'[^'\n]*'|\"[^\"\n]*\"|`[^'\n]*'")
_DIRECTIVE = re.compile(r"(#\s*(?:error|warning)\b).*")


def trim_compiler_output(output: str, ws: Path) -> str:
    """Keep each error with a little context, drop template backtraces and include chains,
    shorten paths to workspace-relative ones, and cap the length (saying what was cut).
    Nothing of a file outside the workspace is quoted (`_own_bytes_only`)."""
    text = output.replace(str(ws) + "/", "")
    kept: list[str] = []
    lines = _own_bytes_only(text.splitlines())
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


def _own_bytes_only(lines: list[str]) -> list[str]:
    """A diagnostic placed in a file outside the workspace (one the confined compiler may read:
    a toolchain header, the venv's pyvenv.cfg) keeps its place and its message, never that
    file's bytes: the source and caret lines after it are dropped (up to the next diagnostic),
    and what its message quotes or an `#error` prints is elided. Issue 24: with the static
    checks off, `#include` of pyvenv.cfg put the file's lines into the reason."""
    out: list[str] = []
    outside = False
    for line in lines:
        place = _PLACE.match(line)
        if place:
            name = place["file"]
            outside = name.startswith(("/", "<", "{")) or ".." in Path(name).parts
            if outside:
                message = _DIRECTIVE.sub(r"\1 …", _QUOTED.sub("'…'", place["message"]))
                line = line[:place.start("message")] + message
        elif outside:
            continue
        out.append(line)
    return out
