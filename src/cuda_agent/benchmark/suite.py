"""Which tasks a run covers, selected deterministically (a resumed run sees the same list),
and which of them this machine cannot run at all (`unmet_requirements`: KernelBench level 4
needs Hugging Face weights, and the evaluation has no network), so they are skipped with a
reason instead of charged to the candidate. Loading itself is the suite registry's (`suites/registry.py`).
"""

from __future__ import annotations

import ast
import fnmatch
import importlib.util
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path

from ..suites.registry import load_suite_tasks
from ..tasks import Task, TaskError
from .records import by_level

PRECISIONS = ("fp32", "fp16", "bf16")

# KernelBench's curated subsets, level -> problem ids (ScalingIntelligence/KernelBench
# src/kernelbench/dataset.py at 423217d: LEVEL{1,2,3}_REPRESENTATIVE_IDS, "a curated
# representative subset for quick iteration": matmul, conv, norms, pooling; fusions; full models).
SUBSETS: dict[str, dict[int, tuple[int, ...]]] = {
    "representative": {
        1: (1, 3, 6, 18, 23, 26, 33, 36, 40, 42, 48, 54, 57, 65, 77, 82, 86, 87),
        2: (1, 2, 8, 18, 23, 28, 33, 43),
        3: (1, 5, 8, 11, 20, 21, 33, 38, 43),
    },
}
# Files a `from_pretrained` model needs in the local Hugging Face cache (any one of the weights).
_HF_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")


@dataclass
class Suite:
    """The tasks of one run, in order, and where they came from."""

    spec: str
    tasks: list[Task]
    rejected: list[str] = field(default_factory=list)  # inputs that were not valid tasks
    precision: str | None = None  # every task runs in this precision (None: as its code makes it)
    subset: str | None = None     # the curated subset chosen, if any

    def levels(self) -> dict[str, int | None]:
        return {t.name: t.level for t in self.tasks}


def load_suite(spec: str | Path, *, levels: Iterable[int] | None = None, only: Sequence[str] | None = None,
               per_level: int | None = None, interleave: bool = False, subset: str | None = None,
               precision: str | None = None) -> Suite:
    """Resolve `spec` through the suite registry ("examples", "flashinfer:DIR", a `.txt` task list,
    a KernelBench checkout or anything `load_tasks` reads: `suites/registry.py`). Then keep the tasks of
    `levels`, those of the curated `subset` (a name in SUBSETS; levels it does not cover are
    dropped), those matching `only` (names or shell globs), and at most `per_level` per
    level, spread evenly over each level's natural order. `interleave` orders the tasks
    round-robin over levels (L1, L2, L3, L1, ...), so a run cut short still covers every level.
    `precision` (fp32 / fp16 / bf16) runs every task's reference, inputs and weights in it."""
    spec = str(spec)
    if subset is not None and subset not in SUBSETS:
        raise ValueError(f"unknown subset {subset!r}; known: {', '.join(SUBSETS)}")
    if precision is not None and precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; choose one of {', '.join(PRECISIONS)}")
    loaded = load_suite_tasks(spec, on_error="skip")
    tasks, rejected = list(loaded), [str(e) for e in loaded.rejected]
    if levels is not None:
        wanted = set(levels)
        tasks = [t for t in tasks if t.level in wanted]
    if subset is not None:
        ids = SUBSETS[subset]
        tasks = [t for t in tasks if t.level in ids and t.problem_id in ids[t.level]]
    if only:
        tasks = [t for t in tasks if any(fnmatch.fnmatchcase(t.name, pat) or t.name.endswith("/" + pat)
                                         for pat in only)]
    if per_level is not None:
        tasks = spread_per_level(tasks, per_level)
    if interleave:
        tasks = interleave_levels(tasks)
    names = [t.name for t in tasks]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise TaskError(spec, f"task names must be unique in a run; repeated: {', '.join(dupes[:5])}")
    if not tasks:
        raise TaskError(spec, "no tasks left after selection (check --level / --subset / --only / --per-level)")
    if precision is not None:
        tasks = [t.model_copy(update={"precision": precision}) for t in tasks]
    return Suite(spec=spec, tasks=tasks, rejected=rejected, precision=precision, subset=subset)


def unmet_requirements(task: Task) -> str | None:
    """Why this machine cannot run `task` at all, or None: a module it imports is not
    installed, or it loads a pretrained model (`X.from_pretrained(name)`) whose files are not
    in the local Hugging Face cache (evaluations have no network). Static (AST): nothing of
    the task runs here."""
    try:
        tree = ast.parse(task.source)
    except SyntaxError:
        return None  # the evaluation reports it
    missing = sorted({m for m in _imported_modules(tree) if importlib.util.find_spec(m) is None})
    if missing:
        return f"needs package(s) not installed here: {', '.join(missing)}"
    needs = _pretrained(tree)
    if needs is None:
        return "loads a pretrained model whose name is computed at run time; its weights cannot be checked offline"
    absent = [f"{repo} ({'config' if config_only else 'config + weights'})"
              for repo, config_only in sorted(needs.items()) if not _hf_cached(repo, config_only)]
    if absent:
        return ("needs pretrained files that are not in the local Hugging Face cache (the evaluation has no "
                f"network): {', '.join(absent)}")
    return None


def _imported_modules(tree: ast.Module) -> set[str]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out


def _pretrained(tree: ast.Module) -> dict[str, bool] | None:
    """Model names passed to `.from_pretrained(...)` -> whether only a config is loaded;
    None when a name is not a string literal or a module-level string constant."""
    consts = {t.id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
              and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
              for t in node.targets if isinstance(t, ast.Name)}
    needs: dict[str, bool] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "from_pretrained"):
            continue
        arg = node.args[0] if node.args else next((k.value for k in node.keywords
                                                   if k.arg == "pretrained_model_name_or_path"), None)
        name = arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else \
            consts.get(arg.id) if isinstance(arg, ast.Name) else None
        # KernelBench level 4 passes the name through get_init_inputs() into Model.__init__
        names = [name] if name is not None else _init_input_strings(tree, consts)
        if not names:
            return None
        owner = node.func.value
        config_only = isinstance(owner, ast.Name) and "Config" in owner.id
        for n in names:
            needs[n] = needs.get(n, True) and config_only
    return needs


def _init_input_strings(tree: ast.Module, consts: dict[str, str]) -> list[str]:
    """String constants that `get_init_inputs()` returns (literals or module-level names)."""
    out: list[str] = []
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef) and fn.name == "get_init_inputs":
            for ret in ast.walk(fn):
                if isinstance(ret, ast.Return) and isinstance(ret.value, (ast.List, ast.Tuple)):
                    for e in ret.value.elts:
                        if isinstance(e, ast.Constant) and isinstance(e.value, str):
                            out.append(e.value)
                        elif isinstance(e, ast.Name) and e.id in consts:
                            out.append(consts[e.id])
    return out


def _hf_cached(repo: str, config_only: bool) -> bool:
    if Path(repo).is_dir():  # a local folder
        return (Path(repo) / "config.json").is_file()
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return False

    def cached(name: str) -> bool:
        return isinstance(try_to_load_from_cache(repo, name), str)

    return cached("config.json") and (config_only or any(cached(w) for w in _HF_WEIGHTS))


def spread_per_level(tasks: list[Task], n: int) -> list[Task]:
    """At most `n` tasks per level, evenly spaced over the level's order (first and last
    included), so a subset covers small and large problem ids alike."""
    if n < 1:
        raise ValueError("per_level must be at least 1")
    keep: set[str] = set()
    for group in by_level(tasks, attrgetter("level")).values():
        if len(group) <= n:
            keep.update(t.name for t in group)
        elif n == 1:
            keep.add(group[0].name)
        else:
            keep.update(group[round(i * (len(group) - 1) / (n - 1))].name for i in range(n))
    return [t for t in tasks if t.name in keep]


def interleave_levels(tasks: list[Task]) -> list[Task]:
    """Round-robin over levels, each level keeping its own order."""
    ordered = list(by_level(tasks, attrgetter("level")).values())
    return [g[i] for i in range(max(map(len, ordered), default=0)) for g in ordered if i < len(g)]
