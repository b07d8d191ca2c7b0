"""Triton: `kernels/*.py` holding `@triton.jit` kernels and the launchers model_new.py calls.

The "build" snapshots the checked files into the cache, so the candidate loads the very bytes the
static allowlist read. What Triton needs while it compiles, and why: `docs/languages.md` (Triton).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
import types
from functools import cache
from pathlib import Path
from typing import Any

from ..base import Language, SandboxNeeds, tool_scripts

EXTENSION = "triton_extension"
MANIFEST = "manifest.triton.json"


class TritonLanguage(Language):
    name = "triton"
    title = "Triton (kernels/*.py with @triton.jit kernels and their launchers)"
    artifact_suffix = ".triton.json"
    warm_up = True
    spawns_while_loading = True

    def extension_name(self, backend: str) -> str:
        return EXTENSION

    def fixed_files(self, task: Any, backend: str, rules: str = "paper") -> dict[str, str]:
        return {"SKILL.md": (Path(__file__).parent / "templates" / "SKILL.triton.md").read_text(),
                "model.py": task.source, f"{EXTENSION}.py": _loader_module(), **tool_scripts()}

    def check(self, root: Path, backend: str, *, disabled_rules: frozenset[str] = frozenset(),
              cache_dir: Path | None = None, rules: str = "paper") -> list[Any]:
        from ..model_new_rules import check_model_new  # (no vendor library can be reached from Triton: `rules` is moot)
        from ..records import Finding
        from .rules import check_triton_workspace

        root = Path(root)
        found: list[Finding] = []
        model_new = root / "model_new.py"
        if model_new.is_symlink():
            found.append(Finding(file="model_new.py", line=1, rule="file-outside-workspace",
                                 message="model_new.py is a link"))
        elif model_new.is_file():
            found += check_model_new(model_new.read_text(errors="replace"), EXTENSION)
        found += check_triton_workspace(root)
        return sorted((f for f in found if f.rule not in disabled_rules), key=lambda f: (f.file, f.line))

    def build(self, root: Path, backend: Any, *, cache_dir: Path, timeout_s: float) -> Any:
        from ..records import BuildResult

        t0 = time.monotonic()
        kdir = Path(root) / "kernels"
        files = sorted(p for p in kdir.glob("*.py") if p.is_file() and not p.is_symlink()) if kdir.is_dir() else []
        if not files:
            return BuildResult(ok=False, log="no kernels/*.py file: nothing defines a launcher",
                               seconds=time.monotonic() - t0)
        texts = {p.name: p.read_bytes() for p in files}
        for name, data in texts.items():
            try:
                compile(data, f"kernels/{name}", "exec")
            except SyntaxError as e:
                return BuildResult(ok=False, log=f"kernels/{name}:{e.lineno}: {e.msg}", seconds=time.monotonic() - t0)
        key = hashlib.sha256(b"".join(n.encode() + b"\0" + d + b"\0" for n, d in texts.items())).hexdigest()
        out = Path(cache_dir) / "triton" / key[:32]
        manifest = out / MANIFEST
        if not manifest.is_file():
            tmp = out.with_name(f"{out.name}.tmp{os.getpid()}")
            tmp.mkdir(parents=True, exist_ok=True)
            for name, data in texts.items():
                (tmp / name).write_bytes(data)
            (tmp / MANIFEST).write_text(json.dumps({"language": "triton", "files": sorted(texts),
                                                    "sha256": key}))
            try:
                os.replace(tmp, out)
            except OSError:  # another build made it first
                shutil.rmtree(tmp, ignore_errors=True)
        return BuildResult(ok=True, library=str(manifest), seconds=time.monotonic() - t0,
                           compiled_units=len(files))

    def shared_writable(self) -> tuple[Path, ...]:
        shared = os.environ.get("CUDA_AGENT_TRITON_CACHE_DIR")
        if not shared:
            return ()
        Path(shared).mkdir(parents=True, exist_ok=True)  # a cache shared between evaluations: faster,
        return (Path(shared),)                            # and writable by every candidate

    def sandbox_needs(self, scratch: Path) -> SandboxNeeds:
        env: dict[str, str] = {}
        writable = list(self.shared_writable())
        if writable:
            env["TRITON_CACHE_DIR"] = str(writable[0])
        libcuda = _loaded_libcuda_dir()
        if libcuda and not os.environ.get("TRITON_LIBCUDA_PATH"):
            env["TRITON_LIBCUDA_PATH"] = libcuda
        return SandboxNeeds(writable=tuple(writable), executable=tuple(triton_executables()),
                            processes_while_loading=self.spawns_while_loading, environment=env)

    def install(self, extension: str, artifact: str, workspace: Path) -> Any:
        return install_triton_package(extension, Path(artifact).parent)


def install_triton_package(name: str, directory: Path) -> types.ModuleType:
    """Import every kernels file as `<name>.<stem>` and expose each public launcher (a plain
    function defined in that file) as `<name>.<launcher>`; two files defining one name fail."""
    package = types.ModuleType(name, f"Triton launchers from {directory}")
    package.__path__ = [str(directory)]  # type: ignore[attr-defined]
    package.__file__ = str(directory / "__init__.py")
    sys.modules[name] = package
    owners: dict[str, str] = {}
    for path in sorted(Path(directory).glob("*.py")):
        module = importlib.import_module(f"{name}.{path.stem}")
        for attr, value in vars(module).items():
            if attr.startswith("_") or not isinstance(value, types.FunctionType) or value.__module__ != module.__name__:
                continue
            if attr in owners:
                raise ImportError(f"{name}: launcher {attr!r} is defined in both kernels/{owners[attr]}.py and "
                                  f"kernels/{path.stem}.py")
            owners[attr] = path.stem
            setattr(package, attr, value)
    if not owners:
        raise ImportError(f"{name}: no launcher: define a public function in kernels/*.py that launches a kernel")
    return package


@cache
def triton_executables() -> list[Path]:
    """The binaries Triton may start while compiling (and their ELF interpreters): its bundled
    NVIDIA tools (or TRITON_PTXAS_PATH), the C compiler's driver, cc1, as, collect2, ld, plus
    CUDA_AGENT_TRITON_EXEC (os.pathsep-separated) for anything a site adds."""
    found: list[Path] = []
    spec = importlib.util.find_spec("triton")
    if spec and spec.origin:
        found.append(Path(spec.origin).parent / "backends" / "nvidia" / "bin")
    if os.environ.get("TRITON_PTXAS_PATH"):
        found.append(Path(os.environ["TRITON_PTXAS_PATH"]))
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("clang")
    if cc:
        cc = shutil.which(cc) or cc
        found.append(Path(cc))
        for prog in ("cc1", "as", "collect2", "ld", "lto-wrapper"):
            try:
                out = subprocess.run([cc, f"-print-prog-name={prog}"], capture_output=True, text=True,
                                     timeout=20).stdout.strip()
            except (OSError, subprocess.SubprocessError):
                continue
            path = out if os.path.isabs(out) else shutil.which(out or prog)
            if path and os.path.exists(path):
                found.append(Path(path))
    found += [Path(p) for p in os.environ.get("CUDA_AGENT_TRITON_EXEC", "").split(os.pathsep) if p]
    resolved = {Path(os.path.realpath(p)) for p in found if os.path.exists(p)}
    for _ in range(3):  # a wrapper script's target may itself be a script or need a loader
        resolved |= {Path(os.path.realpath(i)) for p in list(resolved) for i in _interpreters(p)}
    return sorted(resolved)


def _interpreters(path: Path) -> list[str]:
    """What execve of an executable (or of every file in a directory) also needs: an ELF file's
    PT_INTERP; a script's `#!` interpreter and the absolute paths of executables it names (a
    compiler driver is often `#!/bin/sh` + `exec /opt/.../gcc-real ...`: without both, exec
    fails with EACCES under Landlock)."""
    from elftools.elf.elffile import ELFFile

    out = []
    for f in ([*path.iterdir()] if path.is_dir() else [path]):
        try:
            with open(f, "rb") as fh:
                head = fh.read(65536)
                if head.startswith(b"#!"):
                    text = head.decode(errors="replace")
                    out += [w for w in re.findall(r"(?<![\w.-])(/[\w./+-]+)", text)
                            if os.path.isfile(w) and os.access(w, os.X_OK)]
                    continue
                fh.seek(0)
                for seg in ELFFile(fh).iter_segments():
                    if seg.header.p_type == "PT_INTERP":
                        out.append(seg.get_interp_name())
        except Exception:  # neither an ELF file nor a script, or unreadable: nothing to add
            continue
    return [p for p in out if os.path.exists(p)]


def _loaded_libcuda_dir() -> str | None:
    try:
        for line in Path("/proc/self/maps").read_text().splitlines():
            if line.endswith("libcuda.so.1") or "/libcuda.so" in line:
                return str(Path(line.split()[-1]).parent)
    except OSError:
        pass
    return None


def _loader_module() -> str:
    return (
        f'"""FIXED FILE (protected). `import {EXTENSION}` exposes the launchers in kernels/*.py."""\n'
        "import os as _os\n\n"
        "from cuda_agent.languages.triton.language import install_triton_package as _install\n\n"
        "_dir = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), \"kernels\")\n"
        f"_install(__name__, __import__(\"pathlib\").Path(_dir))\n"
    )
