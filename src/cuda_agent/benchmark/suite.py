"""Which tasks a run covers: a KernelBench checkout, a dataset, the bundled examples, or a
task list, narrowed by level, name or an even per-level sample.

Task loading is `cuda_agent.tasks.load_tasks`'s job; this module only names suites and
selects from them, deterministically, so a resumed run sees the same task list.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..tasks import Task, TaskError, load_tasks

EXAMPLES = "examples"
TASK_LIST_SUFFIX = ".txt"


@dataclass
class Suite:
    """The tasks of one run, in order, and where they came from."""

    spec: str
    tasks: list[Task]
    rejected: list[str] = field(default_factory=list)  # inputs that were not valid tasks

    def levels(self) -> dict[str, int | None]:
        return {t.name: t.level for t in self.tasks}


def load_suite(spec: str | Path, *, levels: Iterable[int] | None = None, only: Sequence[str] | None = None,
               per_level: int | None = None, interleave: bool = False) -> Suite:
    """Resolve `spec`: "examples", a `.txt` task list (one task path per line, relative to
    the list, `#` comments), or anything `load_tasks` reads (a .py file, a directory or
    KernelBench checkout, a parquet/JSONL table, a HF dataset id). Then keep the tasks of
    `levels`, those matching `only` (names or shell globs), and at most `per_level` per
    level, spread evenly over each level's natural order. `interleave` orders the tasks
    round-robin over levels (L1, L2, L3, L1, ...), so a run cut short still covers every level."""
    spec = str(spec)
    tasks, rejected = _resolve(spec)
    if levels is not None:
        wanted = set(levels)
        tasks = [t for t in tasks if t.level in wanted]
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
        raise TaskError(spec, "no tasks left after selection (check --levels / --only / --per-level)")
    return Suite(spec=spec, tasks=tasks, rejected=rejected)


def spread_per_level(tasks: list[Task], n: int) -> list[Task]:
    """At most `n` tasks per level, evenly spaced over the level's order (first and last
    included), so a subset covers small and large problem ids alike."""
    if n < 1:
        raise ValueError("per_level must be at least 1")
    by_level: dict[int | None, list[Task]] = {}
    for t in tasks:
        by_level.setdefault(t.level, []).append(t)
    keep: set[str] = set()
    for group in by_level.values():
        if len(group) <= n:
            keep.update(t.name for t in group)
        elif n == 1:
            keep.add(group[0].name)
        else:
            keep.update(group[round(i * (len(group) - 1) / (n - 1))].name for i in range(n))
    return [t for t in tasks if t.name in keep]


def interleave_levels(tasks: list[Task]) -> list[Task]:
    """Round-robin over levels, each level keeping its own order."""
    groups: dict[int | None, list[Task]] = {}
    for t in tasks:
        groups.setdefault(t.level, []).append(t)
    ordered = [groups[k] for k in sorted(groups, key=lambda lv: (lv is None, lv or 0))]
    return [g[i] for i in range(max(map(len, ordered), default=0)) for g in ordered if i < len(g)]


def _resolve(spec: str) -> tuple[list[Task], list[str]]:
    if spec == EXAMPLES:
        from ..examples import list_examples

        return [e.task for e in list_examples()], []
    path = Path(spec)
    if path.suffix == TASK_LIST_SUFFIX and path.is_file():
        return _task_list(path)
    loaded = load_tasks(spec, on_error="skip")
    return list(loaded), [str(e) for e in loaded.rejected]


def _task_list(path: Path) -> tuple[list[Task], list[str]]:
    tasks: list[Task] = []
    rejected: list[str] = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        entry = line.split("#", 1)[0].strip()
        if not entry:
            continue
        target = Path(entry) if Path(entry).is_absolute() else path.parent / entry
        if not target.exists():
            raise TaskError(f"{path}:{n}", f"no such task file or directory: {entry}")
        loaded = load_tasks(target, on_error="skip")
        tasks += loaded
        rejected += [str(e) for e in loaded.rejected]
    return tasks, rejected
