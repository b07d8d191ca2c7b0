"""C++ kernels (CUDA C++ on the cuda backend, C++/OpenMP on cpu): today's contract.

kernels/*.cu|.cpp + kernels/*_binding.cpp registering torch ops through REGISTER_BINDING,
linked into one library that `model_new.py` imports as `cuda_extension` / `cpu_extension`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..base import Language, tool_scripts
from . import TEMPLATES_DIR
from .extension import install_extension_module
from .vendor import libraries_text


class CppLanguage(Language):
    name = "cpp"
    title = "CUDA C++ (C++/OpenMP on the cpu backend)"
    artifact_suffix = ".so"

    def extension_name(self, backend: str) -> str:
        from ...backends import get_backend

        return get_backend(backend).extension_name

    def fixed_files(self, task: Any, backend: str, rules: str = "paper") -> dict[str, str]:
        ext = self.extension_name(backend)
        return {
            "SKILL.md": (TEMPLATES_DIR / f"SKILL.{backend}.md").read_text().replace(
                "@LIBRARIES@", libraries_text(rules, backend)),
            "model.py": task.source,
            "binding.cpp": (TEMPLATES_DIR / "binding.cpp").read_text(),
            "binding_registry.h": (TEMPLATES_DIR / "binding_registry.h").read_text(),
            f"{ext}.py": _loader_module(ext),
            **tool_scripts(),
        }

    def check(self, root: Path, backend: str, *, disabled_rules: frozenset[str] = frozenset(),
              cache_dir: Path | None = None, rules: str = "paper") -> list[Any]:
        from .source_rules import check_checked_bytes

        return check_checked_bytes(root, backend, self.extension_name(backend), TEMPLATES_DIR,
                                   disabled_rules=disabled_rules, cache_dir=cache_dir, rules=rules)

    def build(self, root: Path, backend: Any, *, cache_dir: Path, timeout_s: float) -> Any:
        from .build import build_workspace

        return build_workspace(root, backend, cache_dir=cache_dir, timeout_s=timeout_s)

    def check_artifact(self, artifact: str, backend: str, root: Path, *, rules: str = "paper") -> list[Any]:
        from .symbols import check_library

        return check_library(artifact, backend, rules=rules)

    def publish(self, root: Path, backend: Any, artifact: str | None) -> None:
        from .build import publish_library

        publish_library(artifact, Path(root) / "build" / f"{backend.extension_name}.so")

    def install(self, extension: str, artifact: str, workspace: Path) -> Any:
        return install_extension_module(extension, artifact)


def _loader_module(name: str) -> str:
    return (
        f'"""FIXED FILE (protected). `import {name}` loads the library ./compile.sh built from kernels/."""\n'
        "import os as _os\n\n"
        "from cuda_agent.languages.cpp.extension import install_extension_module as _install\n\n"
        f'_lib = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "build", "{name}.so")\n'
        "_install(__name__, _lib)\n"
    )
