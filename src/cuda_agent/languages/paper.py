"""The CUDA Agent paper's own workspace layout (its released `agent_workdir`).

Bindings register with `REGISTER_BINDING(name, fn)` where `fn(pybind11::module&)` defines the
functions, `binding.cpp` is `PYBIND11_MODULE(cuda_extension, m)`, and `utils/compile.sh`,
`utils/verification.py`, `utils/profiling.py` are the agent's tools. A workdir in that layout
is adopted as it is (`adopt_workspace(dir, task, backend, "paper")`) and evaluated unchanged.

The build never compiles the workspace's own `binding.cpp` / `binding_registry.h`: it stages
kernels/ beside this package's interface-compatible rewrites (so `#include "../binding_registry.h"`
resolves to ours), compiles kernels with the backend's compiler and bindings against torch's
and pybind11's headers, and links a Python extension module (`*.pyext.so`) the candidate
imports as `cuda_extension`. Everything after the build is the shared judge.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import re
import shutil
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

from .base import TEMPLATES_DIR, Language

EXTENSION = "cuda_extension"
TEMPLATE = TEMPLATES_DIR / "paper"
# the files the paper's release fixes (SKILL.md: "NO modifications to utils/ ..., binding.cpp
# or binding_registry.h")
PAPER_FIXED = ("SKILL.md", "binding.cpp", "binding_registry.h", "utils/__init__.py", "utils/compile.py",
               "utils/compile.sh", "utils/verification.py", "utils/profiling.py")
# headers a paper binding includes; allowed here, still scanned for compute (ADL reaches ATen)
_PAPER_INCLUDES = re.compile(r"^(torch/types\.h|torch/csrc/utils/pybind\.h|torch/extension\.h|pybind11/\S+|"
                             r"\.\./binding_registry\.h|binding_registry\.h)$")
# calling back into Python from C++ is a torch fallback the C++ allowlist cannot see
_PYTHON_FROM_CPP = re.compile(r"\b(?:py|pybind11)\s*::\s*(?:module_?\s*::\s*import|eval|exec|eval_file|globals|"
                              r"print)\b|\.\s*attr\s*\(|\bPy(?:Run|Import|Eval|Object_Call\w*|Object_GetAttr\w*)"
                              r"\w*\s*\(|\bPy_CompileString\w*\s*\(")
# undefined symbols a pybind11 module needs (the interpreter and torch's Python bindings),
# minus the ones that would run Python code
_PY_SYMBOL = re.compile(r"^(?:_?Py\w+|THP\w+|torch::autograd::\w+|torch::utils::\w+|pybind11::\w+)")
_PY_DENIED = re.compile(r"^_?Py(?:Run|Import|Eval_Eval|_CompileString|_RunMain|Exec|Sys_)|^Py_Compile|"
                        r"^PyObject_CallMethod")
# what pybind11's module init and torch's tensor casters (THPVariable_Wrap, inlined) import,
# read off a built CPU module (tests/languages/test_paper.py): named, not a pattern
_CASTER_SYMBOLS = frozenset((
    "c10::AutogradMetaInterface::~AutogradMetaInterface()", "c10::impl::getGlobalPyInterpreter()",
    "c10::impl::ExcludeDispatchKeyGuard::ExcludeDispatchKeyGuard(c10::DispatchKeySet)",
    "c10::impl::ExcludeDispatchKeyGuard::~ExcludeDispatchKeyGuard()", "vtable for torch::autograd::AutogradMeta",
    "typeinfo for int", "__dynamic_cast", "pthread_mutex_lock", "pthread_mutex_unlock",
))


class PaperLanguage(Language):
    name = "paper"
    title = "The CUDA Agent paper's agent_workdir (pybind11 REGISTER_BINDING registry, utils/ scripts)"
    backends = ("cuda", "cpu")
    artifact_suffix = ".pyext.so"

    def extension_name(self, backend: str) -> str:
        return EXTENSION

    def fixed_files(self, task: Any, backend: str) -> dict[str, str]:
        files = {rel: (TEMPLATE / rel).read_text() for rel in PAPER_FIXED}
        files["utils/_run.py"] = (TEMPLATE / "utils" / "_run.py").read_text().replace("@PYTHON@", sys.executable)
        files["model.py"] = task.source
        return files

    def adoptable_files(self) -> tuple[str, ...]:
        return PAPER_FIXED

    def check(self, root: Path, backend: str, *, disabled_rules: frozenset[str] = frozenset(),
              cache_dir: Path | None = None) -> list[Any]:
        from . import checks as sc

        root = Path(root)
        found = sc.check_workspace(root, backend, EXTENSION, preprocess=False)
        kept = [f for f in found if not _paper_include_allowed(f)]
        for p in sorted((root / "kernels").glob("*")) if (root / "kernels").is_dir() else []:
            if p.suffix not in sc._CPP_EXTS or not p.is_file():
                continue
            code, _ = sc._strip_cpp(p.read_text(errors="replace"))
            for m in _PYTHON_FROM_CPP.finditer(code):
                kept.append(sc.Finding(file=p.relative_to(root).as_posix(), line=code.count("\n", 0, m.start()) + 1,
                                       rule="dynamic-code", message=f"`{m.group(0).strip()}`: calling Python from "
                                       "C++ (a torch fallback the C++ allowlist cannot see)"))
        return sorted((f for f in kept if f.rule not in disabled_rules), key=lambda f: (f.file, f.line))

    def build(self, root: Path, backend: Any, *, cache_dir: Path, timeout_s: float) -> Any:
        from .build import BuildError
        from .build import BuildResult

        t0 = time.monotonic()
        try:
            library, compiled, total = _build(Path(root), backend, Path(cache_dir), t0 + timeout_s)
        except BuildError as exc:
            return BuildResult(ok=False, log=exc.log, seconds=time.monotonic() - t0, timed_out=exc.timed_out)
        return BuildResult(ok=True, library=str(library), seconds=time.monotonic() - t0, compiled_units=compiled,
                           cached_units=total - compiled)

    def check_artifact(self, artifact: str, backend: str, root: Path) -> list[Any]:
        from . import symbols
        from .checks import Finding

        found = []
        names = symbols.undefined_symbols(Path(artifact))
        for mangled, shown in zip(names, symbols._demangle(names)):
            verdict = symbols.classify(shown, backend)
            if not verdict or shown in _CASTER_SYMBOLS:
                continue
            if verdict[0] == "symbol-not-allowed" and _PY_SYMBOL.match(shown) and not _PY_DENIED.match(shown):
                continue
            found.append(Finding(file=Path(artifact).name, line=1, rule=verdict[0],
                                 message=f"imports `{shown}` ({mangled}), which {verdict[1]}"))
        for f in symbols.check_library(artifact, backend):
            if f.rule == "raw-syscall":
                found.append(f)
        return found

    def publish(self, root: Path, backend: Any, artifact: str | None) -> None:
        if artifact:
            try:
                shutil.copyfile(artifact, Path(root) / f"{EXTENSION}.so")  # where the paper's scripts leave it
            except OSError:
                pass

    def install(self, extension: str, artifact: str, workspace: Path) -> Any:
        import torch  # noqa: F401  (the module's tensor casters need torch's Python bindings loaded)

        loader = importlib.machinery.ExtensionFileLoader(extension, artifact)
        spec = importlib.util.spec_from_file_location(extension, artifact, loader=loader)
        if spec is None:
            raise ImportError(f"cannot load {artifact}")
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        sys.modules[extension] = module
        return module


def _paper_include_allowed(f: Any) -> bool:
    if f.rule not in ("heavy-torch-include", "third-party-include"):
        return False
    m = re.search(r"#\s*include\s*[<\"]([^>\"]+)[>\"]", f.message)
    return bool(m and _PAPER_INCLUDES.match(m.group(1)))


def _build(root: Path, backend: Any, cache: Path, deadline: float) -> tuple[Path, int, int]:
    from ..backends.base import digest, host_compiler, torch_include_dirs
    from .build import BuildError, _run

    kdir = root / "kernels"
    files = sorted(p for p in kdir.iterdir() if p.is_file()) if kdir.is_dir() else []
    bindings = [p for p in files if p.name.endswith("_binding.cpp")]
    kernels = [p for p in files if p.suffix == backend.kernel_suffix and p not in bindings]
    if not bindings:
        raise BuildError("no kernels/*_binding.cpp: nothing calls REGISTER_BINDING")
    stray = [p.name for p in files if p.suffix in {".cu", ".cpp", ".cc", ".c"} and p not in bindings + kernels]
    if stray:
        raise BuildError(f"files the {backend.name} backend does not build: {', '.join(stray)}")
    headers = b"".join(p.name.encode() + p.read_bytes() for p in files if p.suffix in (".h", ".hpp", ".cuh"))
    stage = Path(tempfile.mkdtemp(prefix="paper-stage-", dir=_ensure(cache / "paper")))
    try:
        (stage / "kernels").mkdir()
        for p in files:
            shutil.copyfile(p, stage / "kernels" / p.name)
        for fixed in ("binding_registry.h", "binding.cpp"):
            shutil.copyfile(TEMPLATE / fixed, stage / fixed)
        py_include = sysconfig.get_paths()["include"]
        host = [*backend.host_flags(), "-fvisibility=hidden", f"-I{py_include}", f"-DTORCH_EXTENSION_NAME={EXTENSION}",
                *[f"-isystem{d}" for d in torch_include_dirs()]]
        toolchain = backend.toolchain_id()
        units = [(stage / "kernels" / p.name, "kernel") for p in kernels]
        units += [(stage / "binding.cpp", "binding")] + [(stage / "kernels" / p.name, "binding") for p in bindings]
        objects, compiled = [], 0
        registry = (TEMPLATE / "binding_registry.h").read_bytes()
        for src, kind in units:
            key = digest("paper", kind, toolchain, " ".join(host), src.read_bytes(), headers, registry)
            obj = _ensure(cache / "objects") / f"{key}.o"
            if not obj.exists():
                tmp = stage / f"{key}.o"
                cmd = (backend.kernel_compile_cmd(src, tmp, []) if kind == "kernel"
                       else [host_compiler(), *host, "-c", str(src), "-o", str(tmp)])
                _run(cmd, deadline, stage)
                os.replace(tmp, obj)
                compiled += 1
            objects.append(obj)
        lib_key = digest("paper-link", toolchain, *[o.name for o in objects])
        out = _ensure(cache / "libraries" / lib_key[:32]) / f"{EXTENSION}.pyext.so"
        if not out.exists():
            from ..backends.base import torch_lib_dir

            tmp = stage / "ext.so"
            cmd = backend.link_cmd(objects, tmp, []) + [f"-L{torch_lib_dir()}", "-ltorch_python", "-ltorch"]
            _run(cmd, deadline, stage)
            os.replace(tmp, out)
        return out, compiled, len(units)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _ensure(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
