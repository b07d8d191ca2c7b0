"""Turn task sources (files, KernelBench checkouts, Ops-6K tables, HF datasets) into Tasks.

Every loader validates each task's source statically (see `Task.from_source`), so a bad
input fails here with a `TaskError` naming the file or row, never later inside a sandbox.
Loaders that read many tasks take `on_error`: "raise" stops at the first bad one; "skip"
keeps going and lists the failures in `LoadedTasks.rejected` so callers can report them.
"""

from __future__ import annotations

import ast
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from cuda_agent.tasks.task import Task, TaskError

OnError = Literal["raise", "skip"]

TABLE_SUFFIXES = (".parquet", ".jsonl", ".json")
OPS6K_DATASET = "BytedTsinghua-SIA/CUDA-Agent-Ops-6K"

_LEVEL_DIR = re.compile(r"level(\d+)")
_PROBLEM_FILE = re.compile(r"(\d+)_.+")
_HF_ID = re.compile(r"[\w.-]+/[\w.-]+")
# Optional table columns that map onto Task fields; any other extra column goes to metadata.
_FIELD_COLUMNS = ("name", "level", "problem_id", "atol", "rtol")
_OPS6K_COLUMNS = ("ops", "data_source", "code")
# Columns holding a list of workloads ({"name", "params"}), as a list or its JSON text.
_WORKLOAD_COLUMNS = ("workloads", "held_out")


class LoadedTasks(list[Task]):
    """Tasks in load order, plus the inputs rejected under on_error="skip"."""

    def __init__(self) -> None:
        super().__init__()
        self.rejected: list[TaskError] = []


def load_tasks(source: str | Path, *, on_error: OnError = "raise") -> LoadedTasks:
    """Load whatever `source` names: a .py file, a directory, a table file, a HF dataset id, or
    (as the CLI accepts) a bundled example's name such as "swish"."""
    path = Path(source)
    if path.is_dir():
        return load_task_dir(path, on_error=on_error)
    if path.suffix in TABLE_SUFFIXES:
        return load_task_table(path, on_error=on_error)
    if path.is_file() and path.suffix == ".py":
        return _gather([partial(load_task_file, path)], on_error)
    if path.is_file():
        expected = ", ".join((".py", *TABLE_SUFFIXES))
        raise TaskError(str(source), f"unsupported file type {path.suffix!r}; expected {expected}")
    if _HF_ID.fullmatch(str(source)) and path.suffix != ".py":
        return load_hf_dataset(str(source), on_error=on_error)
    bundled = bundled_task(str(source))
    if bundled is not None:
        return _gather([lambda: bundled], on_error)
    raise TaskError(str(source), "no such file or directory (nor a HF dataset id like owner/name, nor a bundled "
                    f"example: {', '.join(bundled_task_names())})")


BUNDLED_DIR = Path(__file__).resolve().parents[1] / "examples"
"""The bundled examples' tasks: `<name>/task.py` (their solutions are `cuda_agent.examples`')."""


def bundled_task_names() -> list[str]:
    return sorted(p.parent.name for p in BUNDLED_DIR.glob("*/task.py"))


def bundled_task(name: str) -> Task | None:
    """The bundled example task `name` ("swish"; "examples/swish" too), or None. Examples declare
    their KernelBench level in a `# level: N` comment."""
    name = name.removeprefix("examples/")
    task_file = BUNDLED_DIR / name / "task.py"
    if "/" in name or not task_file.is_file():
        return None
    source = task_file.read_text()
    level = next((int(line.split(":", 1)[1]) for line in source.splitlines() if line.startswith("# level:")), 1)
    return Task.from_source(source, name=f"examples/{name}", origin=str(task_file), level=level)


def load_task_file(path: str | Path) -> Task:
    """One KernelBench-format .py file; a `.../level{N}/{id}_{Name}.py` path sets level, id."""
    path = Path(path)
    if not path.is_file():
        raise TaskError(str(path), "no such file")
    return _file_task(path, path.stem)


def load_task_dir(path: str | Path, *, on_error: OnError = "raise") -> LoadedTasks:
    """Every task .py file under `path`, in natural order (level1/2 before level1/10).

    A KernelBench repository root is accepted too: its `KernelBench/` folder is loaded,
    not its scripts. Files and folders starting with `_` or `.` are skipped. Non-KernelBench
    files are named by their path relative to the root, so names stay unique.
    """
    root = Path(path)
    if not root.is_dir():
        raise TaskError(str(root), "no such directory")
    if (root / "KernelBench").is_dir():
        root = root / "KernelBench"
    files = _task_files(root)
    if not files:
        raise TaskError(str(root), "contains no task .py files")
    names = (p.relative_to(root).with_suffix("").as_posix() for p in files)
    return _gather([partial(_file_task, p, n) for p, n in zip(files, names)], on_error)


def load_task_table(path: str | Path, *, on_error: OnError = "raise") -> LoadedTasks:
    """An Ops-6K style table (.parquet, or .jsonl / .json with one object per line).

    Required column: `code`. Ops-6K columns `ops` and `data_source` fill those fields;
    `name`, `level`, `problem_id`, `atol`, `rtol` are honoured, and `workloads` / `held_out`
    (lists of {"name", "params"}, or their JSON text); other columns go to metadata.
    Rows are named `{file stem}/{row:05d}` unless a `name` column says otherwise. A row's
    origin is `file#row=N` (0-based, as parquet tools count) or, in JSONL, `file:LINE` (1-based,
    as editors count).
    """
    path = Path(path)
    if not path.is_file():
        raise TaskError(str(path), "no such file")

    def where(i: int) -> dict[str, str]:
        return {"origin": f"{path}#row={i}", "default_name": f"{path.stem}/{i:05d}"}

    if path.suffix == ".parquet":
        rows = _read_parquet(path)
        attempts = [partial(task_from_row, row, **where(i)) for i, row in enumerate(rows)]
    else:
        lines = _json_records(path)
        attempts = [partial(_json_row_task, line, **{**where(i), "origin": f"{path}:{lineno}"})
                    for i, (lineno, line) in enumerate(lines)]
    if not attempts:
        raise TaskError(str(path), "table has no rows")
    return _gather(attempts, on_error)


def load_hf_dataset(
    dataset_id: str = OPS6K_DATASET, split: str = "train", *, on_error: OnError = "raise"
) -> LoadedTasks:
    """A Hugging Face dataset with the Ops-6K schema, via the optional `datasets` package."""
    try:
        import datasets
    except ImportError:
        raise TaskError(
            dataset_id,
            "read as a Hugging Face dataset id, which needs the `datasets` package: "
            "pip install 'cuda-agent[data]' (or download the parquet file and pass its path; "
            "if you meant a local path, it does not exist)",
        ) from None
    try:
        rows = datasets.load_dataset(dataset_id, split=split)
    except (OSError, ValueError) as exc:  # connection, offline-mode and not-found errors
        offline = " (HF offline mode is on: only a cached copy is used)" if _hf_offline() else ""
        raise TaskError(
            dataset_id,
            f"could not reach or load split {split!r}{offline}: {exc}. Download it where there is "
            f"network (huggingface-cli download --repo-type dataset {dataset_id}) and pass the "
            "parquet file path instead.",
        ) from exc
    where = f"{dataset_id}[{split}]#row="
    attempts = [
        partial(task_from_row, row, origin=f"{where}{i}", default_name=f"{dataset_id}/{i:05d}")
        for i, row in enumerate(rows)
    ]
    return _gather(attempts, on_error)


def task_from_row(row: Mapping[str, Any], *, origin: str, default_name: str) -> Task:
    """One Ops-6K row (from parquet, JSONL or a HF dataset) as a validated Task."""
    code = row.get("code")
    if not isinstance(code, str) or not code.strip():
        raise TaskError(origin, "row has no `code` (the KernelBench-format source)")
    fields = {col: row[col] for col in _FIELD_COLUMNS if row.get(col) is not None}
    for col in _WORKLOAD_COLUMNS:
        value = row.get(col)
        if isinstance(value, str) and value.strip():
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise TaskError(origin, f"column {col!r} is not JSON: {exc}") from None
        if value:
            fields[col] = value
    name = str(fields.pop("name", default_name))
    metadata = {k: v for k, v in row.items() if k not in _FIELD_COLUMNS + _OPS6K_COLUMNS + _WORKLOAD_COLUMNS}
    try:
        return Task.from_source(
            code,
            name=name,
            origin=origin,
            ops=parse_ops(row.get("ops")),
            data_source=row.get("data_source"),
            metadata=metadata,
            **fields,
        )
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'task'}: {e['msg']}" for e in exc.errors())
        raise TaskError(origin, f"bad column value: {problems}") from None


def parse_ops(value: Any) -> list[str]:
    """Ops-6K stores `ops` as list text ("['torch.relu']"); accept that, JSON, a list, or "a, b".

    JSON is tried first, then a Python literal; if neither yields a list the text is split on
    commas with brackets and quotes stripped, so a malformed cell still gives usable names.
    """
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    text = str(value).strip()
    for parse in (json.loads, ast.literal_eval):
        try:
            parsed = parse(text)
        except (ValueError, SyntaxError, TypeError, RecursionError):
            continue
        if isinstance(parsed, (list, tuple)):
            return [str(v) for v in parsed]
    parts = (part.strip(" \t'\"[]") for part in text.strip("[]").split(","))
    return [part for part in parts if part]


def _gather(attempts: Iterable[Callable[[], Task]], on_error: OnError) -> LoadedTasks:
    """Run each task-making call, raising or recording its TaskError as `on_error` says."""
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', not {on_error!r}")
    loaded = LoadedTasks()
    for attempt in attempts:
        try:
            loaded.append(attempt())
        except TaskError as exc:
            if on_error == "raise":
                raise
            loaded.rejected.append(exc)
    return loaded


def _file_task(path: Path, name: str) -> Task:
    """Read and validate one file; a KernelBench `levelN/ID_Name.py` path overrides `name`."""
    origin = str(path)
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskError(origin, f"cannot be read: {exc}") from None
    level = _LEVEL_DIR.fullmatch(path.parent.name)
    problem = _PROBLEM_FILE.fullmatch(path.stem)
    if level and problem:
        return Task.from_source(
            source,
            name=f"{path.parent.name}/{path.stem}",
            origin=origin,
            level=int(level[1]),
            problem_id=int(problem[1]),
        )
    return Task.from_source(source, name=name, origin=origin)


def _task_files(root: Path) -> list[Path]:
    """Task .py files under `root`, skipping `_`/`.` files and folders (__pycache__, .git)."""
    files: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(("_", "."))]
        wanted = (f for f in filenames if f.endswith(".py") and not f.startswith(("_", ".")))
        files += (Path(dirpath) / f for f in wanted)
    return sorted(files, key=lambda p: _natural_key(p.relative_to(root).as_posix()))


def _natural_key(text: str) -> list[str | int]:
    """Sort key ordering embedded numbers numerically; re.split keeps str/int slots aligned."""
    return [int(tok) if tok.isdigit() else tok for tok in re.split(r"(\d+)", text)]


def _read_parquet(path: Path) -> list[dict[str, Any]]:
    """All rows of a parquet file; an unreadable or code-less file fails as a whole."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (OSError, ValueError) as exc:  # pyarrow.ArrowInvalid is a ValueError
        raise TaskError(str(path), f"cannot be read as parquet: {exc}") from None
    if "code" not in table.column_names:
        columns = ", ".join(table.column_names)
        raise TaskError(str(path), f"has no `code` column (columns: {columns})")
    return table.to_pylist()


def _json_records(path: Path) -> list[tuple[int, str]]:
    """The non-blank lines of a JSONL file with their 1-based line numbers, each still JSON
    text so bad lines fail per row."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskError(str(path), f"cannot be read: {exc}") from None
    return [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]


def _json_row_task(text: str, *, origin: str, default_name: str) -> Task:
    """Parse one JSONL line and convert it like any other row."""
    try:
        row = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TaskError(origin, f"is not valid JSON: {exc}") from None
    if not isinstance(row, dict):
        raise TaskError(origin, "is not a JSON object")
    return task_from_row(row, origin=origin, default_name=default_name)


def _hf_offline() -> bool:
    """Whether the user has put the Hugging Face libraries in offline mode."""
    flags = (os.environ.get(v, "") for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))
    return any(f.strip().lower() in ("1", "true", "yes", "on") for f in flags)
