"""The Task record: one self-contained KernelBench-format problem.

A task is plain source text; everything else (level, origin, hash) is metadata. The
source is checked statically (AST) when the task is made, so a malformed file is rejected
with a message naming the file and the problem before anything runs.
"""

from __future__ import annotations

import ast
import hashlib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")


class TaskError(ValueError):
    """A task that cannot be used, with the file (or row) it came from."""

    def __init__(self, origin: str, problem: str):
        super().__init__(f"{origin}: {problem}")
        self.origin = origin
        self.problem = problem


class Task(BaseModel):
    """One problem: a `Model`, `get_inputs()` and `get_init_inputs()` in one Python file."""

    model_config = ConfigDict(frozen=True)

    name: str
    source: str
    level: int | None = None
    problem_id: int | None = None
    origin: str = Field(default="", description="where it came from: a path, dataset row or HF id")
    ops: list[str] = Field(default_factory=list, description="operator names (Ops-6K `ops`)")
    data_source: str | None = Field(default=None, description="Ops-6K `data_source`, e.g. torch#2")
    atol: float | None = Field(default=None, description="per-task absolute tolerance override")
    rtol: float | None = Field(default=None, description="per-task relative tolerance override")
    precision: Literal["fp32", "fp16", "bf16"] | None = Field(
        default=None, description="run the reference, its inputs and the candidate's weights in this precision "
        "(None: as the task's code makes them)")
    metadata: dict[str, Any] = Field(default_factory=dict)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def content_hash(self) -> str:
        """sha256 of the source: the identity used by every cache (baselines, builds)."""
        return hashlib.sha256(self.source.encode()).hexdigest()

    @classmethod
    def from_source(cls, source: str, *, name: str, origin: str = "", **fields: Any) -> "Task":
        """Validate `source` and build a Task; raise TaskError naming `origin` if unusable."""
        validate_source(source, origin or name)
        return cls(name=name, source=source, origin=origin or name, **fields)


def validate_source(source: str, origin: str) -> None:
    """Reject source that does not parse or lacks the three KernelBench entry points."""
    try:
        tree = ast.parse(source, filename=origin)
    except SyntaxError as exc:
        raise TaskError(origin, f"does not parse: {exc.msg} (line {exc.lineno})") from None
    defined: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Assign):
            defined.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined.update((a.asname or a.name).split(".")[0] for a in node.names)
    missing = [n for n in REQUIRED_NAMES if n not in defined]
    if missing:
        raise TaskError(origin, f"missing top-level definition(s): {', '.join(missing)}")
