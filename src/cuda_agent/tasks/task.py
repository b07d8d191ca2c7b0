"""The Task record: one self-contained KernelBench-format problem.

A task is plain source text; everything else (level, origin, hash) is metadata. The
source is checked statically (AST) when the task is made, so a malformed file is rejected
with a message naming the file and the problem before anything runs.

A task may carry several workloads (input configurations, see workloads.py), some of them
held out: never written into the agent's workspace (`Task.for_agent`), checked by the
evaluation, so a kernel that hard-codes the shapes it was shown fails.
"""

from __future__ import annotations

import ast
import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

from .workloads import Workload, apply_workload, check_workload

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
    workloads: list[Workload] = Field(default_factory=list, description="input configurations shown to the agent; "
                                      "empty: the source as written is the one workload")
    held_out: list[Workload] = Field(default_factory=list, description="configurations the evaluation also checks "
                                     "and the agent's workspace never holds (see for_agent)")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def content_hash(self) -> str:
        """sha256 of the source (and of the visible workloads, when there are any): the
        identity used by every cache (baselines, builds). A single-workload task hashes as it
        always did; held-out workloads are left out so `for_agent()` keeps the identity."""
        text = self.source
        if self.workloads:
            text += "\n#workloads " + json.dumps([w.model_dump() for w in self.workloads], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()

    @model_validator(mode="after")
    def _workloads_apply(self) -> "Task":
        names = [w.name for w in [*self.workloads, *self.held_out]]
        if len(set(names)) != len(names):
            raise ValueError(f"task {self.name}: workload names repeat: {names}")
        for w in [*self.workloads, *self.held_out]:
            problem = check_workload(self.source, w)
            if problem:
                raise ValueError(f"task {self.name}: {problem}")
        shown = {w.digest for w in self.workloads} or {Workload(name="as written").digest}
        for w in self.held_out:
            if w.digest in shown:
                raise ValueError(f"task {self.name}: held-out workload {w.name!r} equals a visible one")
        return self

    def evaluation_workloads(self) -> list[tuple[Workload, bool]]:
        """Every workload the evaluation checks, each with whether it is held out."""
        shown = self.workloads or [Workload(name="default")]
        return [(w, False) for w in shown] + [(w, True) for w in self.held_out]

    def workload_source(self, workload: Workload) -> str:
        """The task source as the judge runs it for `workload`."""
        return apply_workload(self.source, workload)

    def for_agent(self) -> "Task":
        """This task without its held-out workloads: what a workspace may hold."""
        return self.model_copy(update={"held_out": []})

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
    defined = top_level_names(tree)
    missing = [n for n in REQUIRED_NAMES if n not in defined]
    if missing:
        raise TaskError(origin, f"missing top-level definition(s): {', '.join(missing)}")
    own = own_randomness(tree)
    if own:
        raise TaskError(origin, f"draws from a generator of its own or reseeds ({own}): the judge seeds torch's, "
                                "Python's and numpy's global generators anew for every draw, so that every timed "
                                "call gets inputs no kernel has seen; draw from those (a constant belongs in the "
                                "Model, as a buffer)")


# calls that make a task's values independent of the judge's seeds: its own generator, or a reseed (red team rounds
# 14-16: indices, and floats, from a `torch.Generator` of the task's own were the same in every timed call, in whole
# or in part, and kernels that remembered what they computed on them scored 2 and 3)
_OWN_RANDOMNESS = frozenset({"Generator", "manual_seed", "manual_seed_all", "seed", "seed_all", "RandomState",
                             "default_rng", "Random", "set_rng_state", "fork_rng", "initial_seed"})


def own_randomness(tree: ast.Module) -> str:
    """The first call in `get_inputs()` that makes randomness of its own, as "name (line n)"; ""
    if none. Only there: the Model's own seeds and generators (weights made in `__init__`, a GAN's
    `Generator`, a method named `seed`) do not touch what the judge draws (red team round 17 found
    seven honest tasks refused when the whole file was read)."""
    body = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_inputs"]
    for node in (inner for fn in body for inner in ast.walk(fn)):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in _OWN_RANDOMNESS:
                return f"{ast.unparse(func)}(...) on line {node.lineno}"
    return ""


def top_level_names(tree: ast.Module) -> set[str]:
    """Names a module defines at its top level: classes, functions, assignments, imports."""
    defined: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Assign):
            defined.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined.update((a.asname or a.name).split(".")[0] for a in node.names)
    return defined
