"""Where a run's candidates come from, and how each kind is fed to the isolated evaluation.

Kinds (`Candidate.mode`): `workspace` (a workspace, or `model_new.py` + `kernels/`),
`single_file` (KernelBench's `ModelNew` building its kernels with `load_inline`), `reference`
(the task's own `Model`: a harness check) and `policy` (policy.py). Two kinds need a
relaxation, for that kind only and recorded in the run's config (docs/benchmark.md,
"Candidates"): single-file skips `forbidden-import` only when its sole findings import
torch.utils.cpp_extension, and lets the worker start processes (`load_inline` runs the
compiler); the reference turns off the two guards that forbid torch code.
"""

from __future__ import annotations

import ast
from abc import ABC, abstractmethod
from pathlib import Path

from ..evaluation import EvalConfig
from ..tasks import Task
from .records import Candidate

MAX_SOLUTION_BYTES = 8 << 20
SINGLE_FILE_BINDING = "kernels/bench_single_file_binding.cpp"
SINGLE_FILE_BINDING_TEXT = """\
// Written by `cuda-agent bench` (not part of the solution). A single-file solution (or the
// reference, in a harness check) builds no kernels/ of its own; the workspace's extension
// still needs one registered op to link, so it gets this identity op, which nothing calls.
#include "binding_registry.h"
at::Tensor bench_single_file_identity(const at::Tensor& x) { return x; }
REGISTER_BINDING(bench_single_file_identity, bench_single_file_identity)
"""
LOAD_INLINE_MODULE = "torch.utils.cpp_extension"


class SolutionError(ValueError):
    """A solution exists but cannot be used as given (too large, unreadable)."""


class SolutionSource(ABC):
    """Finds the candidate for a task, or None when this source has none."""

    spec: str

    @abstractmethod
    def candidate(self, task: Task, backend: str, sample: int = 0) -> Candidate | None: ...


class ReferenceSolutions(SolutionSource):
    """The task's reference code as its own solution (harness check)."""

    spec = "reference"

    def candidate(self, task: Task, backend: str, sample: int = 0) -> Candidate | None:
        return Candidate(mode="reference", origin="reference")


class ExampleSolutions(SolutionSource):
    """The bundled examples' hand-written solutions for the backend."""

    spec = "examples"

    def candidate(self, task: Task, backend: str, sample: int = 0) -> Candidate | None:
        from ..examples import list_examples

        for ex in list_examples():
            if ex.task.name == task.name and ex.solution_dir(backend).is_dir():
                return _folder_candidate(ex.solution_dir(backend), f"examples/{ex.name}/{backend}")
        return None


class DirectorySolutions(SolutionSource):
    """A folder of solutions, one per task, looked up by the task's name and then its last
    path part (`level1/19_ReLU`, then `19_ReLU`):
      <key>/            a workspace, or a folder with model_new.py (+ kernels/)
      <key>.py          a single-file (load_inline) solution
      level_<L>_problem_<P>_sample_<S>_kernel.py   KernelBench's own naming
    The first that exists wins. Sample S > 0 (pass@k runs) is looked up as <key>/sample_<S>/,
    <key>/sample_<S>.py and KernelBench's name; sample 0 also as the plain names above.
    `sample` offsets every lookup (`--sample 3` alone evaluates sample 3)."""

    def __init__(self, root: str | Path, sample: int = 0) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise SolutionError(f"solutions directory {self.root} does not exist")
        self.sample = sample
        self.spec = str(self.root.resolve())

    def candidate(self, task: Task, backend: str, sample: int = 0) -> Candidate | None:
        for path in self.paths(task, sample):
            if path.is_dir() and ((path / "model_new.py").is_file()):
                return _folder_candidate(path, str(path))
            if path.is_file() and path.suffix == ".py":
                return Candidate(mode="single_file", origin=str(path),
                                 files={"model_new.py": _read(path), SINGLE_FILE_BINDING: SINGLE_FILE_BINDING_TEXT})
        return None

    def paths(self, task: Task, sample: int = 0) -> list[Path]:
        s = self.sample + sample
        keys = list(dict.fromkeys([task.name, task.name.rsplit("/", 1)[-1]]))
        out = []
        for key in keys:
            out += [self.root / key / f"sample_{s}", self.root / key / f"sample_{s}.py"]
            if s == 0:
                out += [self.root / key, self.root / f"{key}.py"]
        if task.level is not None and task.problem_id is not None:
            out.append(self.root / f"level_{task.level}_problem_{task.problem_id}_sample_{s}_kernel.py")
        return out


def solution_source(spec: str | Path, sample: int = 0) -> SolutionSource:
    """"examples", "reference", or a solutions directory."""
    if str(spec) == "examples":
        return ExampleSolutions()
    if str(spec) == "reference":
        return ReferenceSolutions()
    return DirectorySolutions(spec, sample)


def _folder_candidate(folder: Path, origin: str) -> Candidate:
    files = {"model_new.py": _read(folder / "model_new.py")}
    kernels = folder / "kernels"
    if kernels.is_dir():
        for f in sorted(kernels.iterdir()):
            if f.is_file():
                files[f"kernels/{f.name}"] = _read(f)
    if not any(k.startswith("kernels/") for k in files):  # model_new.py alone: it builds its own
        files[SINGLE_FILE_BINDING] = SINGLE_FILE_BINDING_TEXT
        return Candidate(mode="single_file", origin=origin, files=files)
    if sum(len(v) for v in files.values()) > MAX_SOLUTION_BYTES:
        raise SolutionError(f"{origin}: solution is larger than {MAX_SOLUTION_BYTES >> 20} MiB")
    return Candidate(mode="workspace", origin=origin, files=files)


def _read(path: Path) -> str:
    try:
        if path.stat().st_size > MAX_SOLUTION_BYTES:
            raise SolutionError(f"{path} is larger than {MAX_SOLUTION_BYTES >> 20} MiB")
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SolutionError(f"{path} cannot be read: {exc}") from None


# ---- per-kind evaluation settings -----------------------------------------------------------
def reference_config(cfg: EvalConfig) -> EvalConfig:
    """The reference is torch code: only the two guards that forbid torch code are off."""
    guards = cfg.guards.model_copy(update={"static_checks": False, "torch_compute": False})
    return cfg.model_copy(update={"guards": guards})


def single_file_config(cfg: EvalConfig, workspace: Path, backend: str, extension: str) -> EvalConfig:
    """Relax exactly what `load_inline` needs, and only when the static checks' sole
    `forbidden-import` findings are imports of torch.utils.cpp_extension."""
    from ..languages.cpp.source_rules import check_workspace

    guards = cfg.guards
    if guards.static_checks:
        findings = check_workspace(workspace, backend, extension, disabled_rules=frozenset(guards.disabled_rules),
                                   rules=cfg.rules)
        allowed = load_inline_import_lines((workspace / "model_new.py").read_text(errors="replace"))
        blocked = [f for f in findings if f.rule == "forbidden-import"]
        if not blocked or any(f.file != "model_new.py" or f.line not in allowed for f in blocked):
            return cfg  # nothing to relax, or forbidden imports beyond load_inline's: judged as usual
        guards = guards.model_copy(update={"disabled_rules": sorted({*guards.disabled_rules, "forbidden-import"})})
    # load_inline runs ninja and the compilers from inside the candidate's process: new
    # processes must be allowed there (the syscall filter forbids exec); writes stay confined
    # to its scratch dir and it still has no network
    guards = guards.model_copy(update={"no_processes": False, "syscalls": False})
    return cfg.model_copy(update={"guards": guards})


def load_inline_import_lines(source: str) -> set[int]:
    """Lines whose import statement imports torch.utils.cpp_extension and nothing else."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    def only_load_inline(node: ast.AST) -> bool:
        if isinstance(node, ast.Import):
            return all(a.name == LOAD_INLINE_MODULE for a in node.names)
        if not isinstance(node, ast.ImportFrom) or node.level != 0:
            return False
        if node.module == "torch.utils":
            return all(a.name == "cpp_extension" for a in node.names)
        return node.module == LOAD_INLINE_MODULE and all(a.name != "*" for a in node.names)

    return {node.lineno for node in ast.walk(tree) if only_load_inline(node)}
