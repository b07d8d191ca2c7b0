"""Suites by name: a spec "name[:arg]" picks a loader from `SUITES`, which reads `arg` into `LoadedTasks`
(under on_error="skip", what it could not load is in `.rejected`); a spec naming none is KernelBench's."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..tasks import LoadedTasks, OnError, TaskError, load_tasks


def kernelbench(arg: str, on_error: OnError = "raise") -> LoadedTasks:
    """A `.txt` task list (one path per line, relative to the list, `#` comments), or anything `load_tasks`
    reads: a .py file, a directory or KernelBench checkout, a parquet/JSONL table, a HF dataset id."""
    path = Path(arg)
    if path.suffix != ".txt" or not path.is_file():
        return load_tasks(arg, on_error=on_error)
    loaded = LoadedTasks()
    for n, line in enumerate(path.read_text().splitlines(), 1):
        entry = line.split("#", 1)[0].strip()
        if not entry:
            continue
        target = Path(entry) if Path(entry).is_absolute() else path.parent / entry
        if not target.exists():
            raise TaskError(f"{path}:{n}", f"no such task file or directory: {entry}")
        part = load_tasks(target, on_error=on_error)
        loaded.extend(part)
        loaded.rejected.extend(part.rejected)
    return loaded


def examples(arg: str, on_error: OnError = "raise") -> LoadedTasks:
    """The bundled examples: all of them (no arg), `NAME`, or `level=N`."""
    from ..examples import get_example, list_examples

    loaded = LoadedTasks()
    if arg and not arg.startswith("level="):
        loaded.append(get_example(arg).task)
    else:
        loaded.extend(e.task for e in list_examples() if not arg or e.level == int(arg.removeprefix("level=")))
    return loaded


def flashinfer(arg: str, on_error: OnError = "raise") -> LoadedTasks:
    """A flashinfer-trace dataset folder, each definition a multi-workload task (`flashinfer.py`)."""
    from .flashinfer import flashinfer_tasks

    return flashinfer_tasks(arg)


SUITES: dict[str, Callable[[str, OnError], LoadedTasks]] = {
    "kernelbench": kernelbench, "examples": examples, "flashinfer": flashinfer}


def load_suite_tasks(spec: str, on_error: OnError = "raise") -> LoadedTasks:
    """The tasks of "examples", "examples:swish", "flashinfer:DIR", "path/to/KernelBench", ..."""
    name, _, arg = spec.partition(":")
    if name not in SUITES or (name == "kernelbench" and not arg):
        name, arg = "kernelbench", spec
    return SUITES[name](arg, on_error)
