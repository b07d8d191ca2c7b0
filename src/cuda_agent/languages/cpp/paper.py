"""The CUDA Agent paper's own workspace layout (its released `agent_workdir`), adopted as it is.

The build stages kernels/ beside our interface-compatible `binding.cpp` / `binding_registry.h`
(never the workspace's own) and links a Python extension (`docs/languages.md`, the paper's).
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import re
import sys
import sysconfig
from pathlib import Path
from typing import Any

from ..base import Language
from . import TEMPLATES_DIR
from .vendor import libraries_text

EXTENSION = "cuda_extension"
TEMPLATE = TEMPLATES_DIR / "paper"
# the files the paper's release fixes (SKILL.md: "NO modifications to utils/ ..., binding.cpp
# or binding_registry.h")
PAPER_FIXED = ("SKILL.md", "binding.cpp", "binding_registry.h", "utils/__init__.py", "utils/compile.py",
               "utils/compile.sh", "utils/verification.py", "utils/profiling.py")
# SHA-256 of the fixed files of the CUDA Agent release's agent_workdir (BytedTsinghua-SIA/CUDA-Agent at
# 473025c): an adopted folder is checked against these, file by file (hashes only: no release code here)
RELEASE = "BytedTsinghua-SIA/CUDA-Agent@473025c"
RELEASE_SHA256 = {
    "binding.cpp": "43da662b9aedb537a4cb2f04c57d92aeddbe018a9b5f7374ae28ec9bba0b3b62",
    "binding_registry.h": "a829ca7d5de03049c439f30aa01f7f631c06418c31855cf19a67f23d69349e0f",
    "utils/__init__.py": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "utils/compile.py": "4bc806d8021fb430caebcffab3e32d5edc2b13abc8655544faa696fc7d699734",
    "utils/compile.sh": "0707712752799cacc79930d3e5256994c13f511ea355e5346490d67e164af3d0",
    "utils/profiling.py": "5e6fdd564262a296bb51a6e5fe86e16c216717a43d453c4cc6104e55000a577b",
    "utils/verification.py": "c47e6b0810766c49e2c68e10374aed2a54224f31fc8a399158c079f4b9e8312f",
    "SKILL.md": "3161860fb45dea51a688f3fe217ace664df6bd16808d8865824684a58a786d63",
}


def differs_from_release(root: Path) -> list[str]:
    """The fixed files of `root` whose bytes are not the release's (missing ones included)."""
    return [rel for rel, sha in RELEASE_SHA256.items()
            if not (root / rel).is_file() or hashlib.sha256((root / rel).read_bytes()).hexdigest() != sha]


# headers a paper binding includes; allowed here, still scanned for compute (ADL reaches ATen)
_PAPER_INCLUDES = re.compile(r"^(torch/types\.h|torch/csrc/utils/pybind\.h|torch/extension\.h|pybind11/\S+|"
                             r"\.\./binding_registry\.h|binding_registry\.h)$")
# calling back into Python from C++ is a torch fallback the C++ allowlist cannot see
_PYTHON_FROM_CPP = re.compile(r"\b(?:py|pybind11)\s*::\s*(?:module_?\s*::\s*import|eval|exec|eval_file|globals|"
                              r"print)\b|\.\s*attr\s*\(|\bPy(?:Run|Import|Eval|Object_Call\w*|Object_GetAttr\w*)"
                              r"\w*\s*\(|\bPy_CompileString\w*\s*\(")
_PYTHON_MESSAGE = "`{}`: calling Python from C++ (a torch fallback the C++ allowlist cannot see)"
# undefined symbols a pybind11 module needs (the interpreter and torch's Python bindings),
# minus the ones that would run Python code
_PY_SYMBOL = re.compile(r"^(?:_?Py\w+|THP\w+|torch::autograd::\w+|torch::utils::\w+|pybind11::\w+)")
_PY_DENIED = re.compile(r"^_?Py(?:Run|Import|Eval_Eval|_CompileString|_RunMain|Exec|Sys_)|^Py_Compile|"
                        r"^PyObject_CallMethod")
# what pybind11's module init and torch's tensor casters (THPVariable_Wrap, inlined) import,
# read off a built CPU module (tests/languages/cpp/test_paper.py): named, not a pattern
_CASTER_SYMBOLS = frozenset((
    "c10::AutogradMetaInterface::~AutogradMetaInterface()", "c10::impl::getGlobalPyInterpreter()",
    "c10::impl::ExcludeDispatchKeyGuard::ExcludeDispatchKeyGuard(c10::DispatchKeySet)",
    "c10::impl::ExcludeDispatchKeyGuard::~ExcludeDispatchKeyGuard()", "vtable for torch::autograd::AutogradMeta",
    "typeinfo for int", "__dynamic_cast", "pthread_mutex_lock", "pthread_mutex_unlock",
))


class PaperLanguage(Language):
    name = "paper"
    title = "The CUDA Agent paper's agent_workdir (pybind11 REGISTER_BINDING registry, utils/ scripts)"
    artifact_suffix = ".pyext.so"

    def extension_name(self, backend: str) -> str:
        return EXTENSION

    def fixed_files(self, task: Any, backend: str, rules: str = "paper") -> dict[str, str]:
        files = {rel: (TEMPLATE / rel).read_text() for rel in PAPER_FIXED}
        files["SKILL.md"] = files["SKILL.md"].replace("@LIBRARIES@", libraries_text(rules, backend))
        files["utils/_run.py"] = (TEMPLATE / "utils" / "_run.py").read_text().replace("@PYTHON@", sys.executable)
        files["model.py"] = task.source
        return files

    def adoptable_files(self) -> tuple[str, ...]:
        return PAPER_FIXED

    def check(self, root: Path, backend: str, *, disabled_rules: frozenset[str] = frozenset(),
              cache_dir: Path | None = None, rules: str = "paper") -> list[Any]:
        from .source_rules import Dialect, check_checked_bytes

        # its bindings include torch's and pybind11's full headers: no preprocessed pass (PCH)
        return check_checked_bytes(root, backend, EXTENSION, TEMPLATE, preprocess=False, disabled_rules=disabled_rules,
                                   cache_dir=cache_dir, rules=rules,
                                   dialect=Dialect(_PAPER_INCLUDES, (("dynamic-code", _PYTHON_FROM_CPP, _PYTHON_MESSAGE),)))

    def build(self, root: Path, backend: Any, *, cache_dir: Path, timeout_s: float) -> Any:
        from ...backends.base import torch_include_dirs, torch_lib_dir
        from .build import Layout, build_workspace

        layout = Layout(name="paper", templates=TEMPLATE, precompiled=False,
                        host_flags=("-fvisibility=hidden", f"-I{sysconfig.get_paths()['include']}",
                                    f"-DTORCH_EXTENSION_NAME={EXTENSION}", *[f"-isystem{d}" for d in torch_include_dirs()]),
                        link_flags=(f"-L{torch_lib_dir()}", "-ltorch_python", "-ltorch"),
                        library_name=f"{EXTENSION}{self.artifact_suffix}")
        return build_workspace(root, backend, cache_dir=cache_dir, timeout_s=timeout_s, layout=layout)

    def check_artifact(self, artifact: str, backend: str, root: Path, *, rules: str = "paper") -> list[Any]:
        from . import symbols
        from ..records import Finding

        found = []
        names = symbols.undefined_symbols(Path(artifact))
        for mangled, shown in zip(names, symbols._demangle(names)):
            verdict = symbols.classify(shown, backend, rules)
            if not verdict or shown in _CASTER_SYMBOLS:
                continue
            if verdict[0] == "symbol-not-allowed" and _PY_SYMBOL.match(shown) and not _PY_DENIED.match(shown):
                continue
            found.append(Finding(file=Path(artifact).name, line=1, rule=verdict[0],
                                 message=f"imports `{shown}` ({mangled}), which {verdict[1]}"))
        for f in symbols.check_library(artifact, backend, rules=rules):
            if f.rule == "raw-syscall":
                found.append(f)
        return found

    def publish(self, root: Path, backend: Any, artifact: str | None) -> None:
        from .build import publish_library

        publish_library(artifact, Path(root) / f"{EXTENSION}.so")  # where the paper's scripts leave it

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
