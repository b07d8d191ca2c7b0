"""The candidate contract, per language: one small interface, one registry.

A language says only what differs (workspace files, allowlists, build, loader); the judge,
verification, timing and reward are one code path. The artifact's suffix picks the loader, never
a claim inside the workspace (`docs/languages.md`).
"""

from __future__ import annotations

import importlib
import re
import shlex
import sys
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from ..tasks import Task
    from .records import BuildResult, Finding


@dataclass(frozen=True)
class SandboxNeeds:
    """What a language's runtime needs from the candidate sandbox while the candidate loads
    (Triton compiles kernels then). After loading, the candidate process stacks the strict
    filter on top (`sandbox.deny_syscalls()`), so these hold only until "ready"."""

    writable: tuple[Path, ...] = ()
    executable: tuple[Path, ...] = ()
    processes_while_loading: bool = False
    environment: dict[str, str] = field(default_factory=dict)


class Language(ABC):
    """One language a candidate may be written in."""

    name: ClassVar[str]
    title: ClassVar[str]
    artifact_suffix: ClassVar[str]
    # run one forward on the first input slot before "ready" (JIT languages compile then)
    warm_up: ClassVar[bool] = False
    # its runtime starts processes while loading (Triton's compilers): the candidate then runs
    # under a loose syscall filter with the strict one stacked after loading (two filters)
    spawns_while_loading: ClassVar[bool] = False

    # ---- the workspace --------------------------------------------------------------
    @abstractmethod
    def extension_name(self, backend: str) -> str:
        """The module model_new.py imports for this language on `backend`."""

    @abstractmethod
    def fixed_files(self, task: "Task", backend: str, rules: str = "paper") -> dict[str, str]:
        """Protected files (relative path -> text): tamper-checked by hash."""

    def starter_files(self, task: "Task", backend: str) -> dict[str, str]:
        """Files the agent starts from (written once, never protected)."""
        return {"model_new.py": starter_model_new(task.source, self.extension_name(backend))}

    def adoptable_files(self) -> tuple[str, ...] | None:
        """Fixed files an existing directory must have to be adopted (None: all of fixed_files)."""
        return None

    @property
    def backends(self) -> tuple[str, ...]:
        """The backends that run this language (each says so in `Backend.languages`)."""
        from ..backends import BACKEND_NAMES, backend_class

        return tuple(b for b in BACKEND_NAMES if self.name in backend_class(b).languages)

    def check_backend(self, backend: str) -> None:
        if backend not in self.backends:
            raise ValueError(f"the {self.name} language runs on {', '.join(self.backends)}, not {backend}")

    # ---- the evaluator's side (no device) ---------------------------------------------
    @abstractmethod
    def check(self, root: Path, backend: str, *, disabled_rules: frozenset[str] = frozenset(),
              cache_dir: Path | None = None, rules: str = "paper") -> list["Finding"]:
        """Static allowlist findings for the workspace's sources, before anything builds;
        `rules`: the rules profile (`paper` / `strict`, languages/cpp/vendor.py)."""

    @abstractmethod
    def build(self, root: Path, backend: Any, *, cache_dir: Path, timeout_s: float) -> "BuildResult":
        """`kernels/` into one artifact (BuildResult.library), outside the workspace."""

    def check_artifact(self, artifact: str, backend: str, root: Path, *, rules: str = "paper") -> list["Finding"]:
        """Allowlist findings for the built artifact (e.g. a library's imported symbols)."""
        return []

    def publish(self, root: Path, backend: Any, artifact: str | None) -> None:
        """Copy the artifact where the workspace's own loader finds it (agent convenience)."""

    # ---- the candidate process's side ---------------------------------------------------
    def shared_writable(self) -> tuple[Path, ...]:
        """Places outside scratch this language writes whatever the task (created here): the
        candidate process allows them before it knows its language (`sandbox.confine_writes_early`)."""
        return ()

    def sandbox_needs(self, scratch: Path) -> SandboxNeeds:
        return SandboxNeeds()

    @abstractmethod
    def install(self, extension: str, artifact: str, workspace: Path) -> Any:
        """Make `import <extension>` work in this process; return the module."""


# name -> "module:Class", imported on first use so a language's heavy deps stay optional
_REGISTRY: dict[str, str] = {
    "cpp": "cuda_agent.languages.cpp.language:CppLanguage",
    "triton": "cuda_agent.languages.triton.language:TritonLanguage",
    "paper": "cuda_agent.languages.cpp.paper:PaperLanguage",
}
LANGUAGE_NAMES = tuple(_REGISTRY)
DEFAULT_LANGUAGE = "cpp"


def register_language(name: str, target: str) -> None:
    """Add a language ("package.module:Class") to the registry."""
    global LANGUAGE_NAMES
    _REGISTRY[name] = target
    LANGUAGE_NAMES = tuple(_REGISTRY)


def shared_writable_paths() -> list[Path]:
    """Every registered language's `shared_writable` places."""
    return [p for name in LANGUAGE_NAMES for p in get_language(name).shared_writable()]


def get_language(name: str) -> Language:
    try:
        target = _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown language {name!r}; choose one of {', '.join(_REGISTRY)}") from None
    module, cls = target.split(":")
    return getattr(importlib.import_module(module), cls)()


def language_for_artifact(artifact: str | None) -> Language:
    """The language whose build made `artifact` (longest matching suffix wins)."""
    langs = [get_language(n) for n in _REGISTRY]
    hits = [lang for lang in langs if artifact and artifact.endswith(lang.artifact_suffix)]
    if not hits:
        raise ValueError(f"no language builds an artifact like {artifact!r}")
    return max(hits, key=lambda lang: len(lang.artifact_suffix))


def starter_model_new(task_source: str, extension: str) -> str:
    """The reference, renamed: a correct starting point the agent replaces op by op."""
    header = (
        f"# model_new.py -- yours to edit. Replace the torch computation below with ops from\n"
        f"# `{extension}` (built from kernels/ by ./compile.sh). Keep the constructor signature\n"
        f"# and the parameter names of Model: weights are copied with load_state_dict(strict=True).\n"
    )
    # every reference to the class, not only its definition: KernelBench writes
    # `super(Model, self).__init__()` in 245 of its 250 tasks
    body = re.sub(r"\bModel\b(?!New)", "ModelNew", task_source)
    return header + body


def tool_scripts() -> dict[str, str]:
    """compile.sh / verify.sh / profile.sh: the environment's own verbs on this workspace. They
    run the interpreter that made the workspace; if that one is gone (the clone moved), the
    `python3` on PATH (an activated .venv), saying so in one line if it has no cuda_agent."""
    verbs = {"compile.sh": "build", "verify.sh": "evaluate --no-timing", "profile.sh": "evaluate"}
    header = "#!/bin/sh\n# FIXED FILE (protected). Runs the cuda-agent environment on this workspace.\n"
    find = (f"py={shlex.quote(sys.executable)}\n"
            'if [ ! -x "$py" ]; then\n'
            "  py=python3\n"
            '  "$py" -c "import cuda_agent" 2>/dev/null || {\n'
            '    echo "error: the Python that made this workspace is gone and the python3 on PATH has no cuda_agent:" \\\n'
            '         "activate the .venv of a cuda-agent clone" >&2; exit 3; }\n'
            "fi\n")
    return {script: f'{header}{find}exec "$py" -m cuda_agent {verb} "$(dirname "$0")" "$@"\n'
            for script, verb in verbs.items()}
