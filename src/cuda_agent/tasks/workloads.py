"""Workloads: the input configurations (shapes, dtypes, sparsity) one task is judged on.

A workload is a set of values for top-level names of the task's source (`batch_size = 16`,
`dtype = "bfloat16"`, `density = 0.1`). It is applied by rewriting those assignments in the
source text, so values derived from them at import time (`shape = (batch_size, dim)`) follow,
and the judge receives an ordinary KernelBench-format file: it needs no notion of workloads.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Workload(BaseModel):
    """One input configuration: values for top-level names of the task source."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="unique within its task; shown in reports (never for a held-out one)")
    params: dict[str, Any] = Field(default_factory=dict,
                                   description="top-level name -> literal (int, float, str, bool, None, list, dict)")

    @property
    def digest(self) -> str:
        """Identity of the values (not the name): two workloads with equal params are one."""
        return hashlib.sha256(json.dumps(self.params, sort_keys=True).encode()).hexdigest()[:16]


def top_level_assignments(source: str) -> dict[str, ast.expr]:
    """Names assigned once at module level (`x = ...` or `x: T = ...`) and their value nodes."""
    found: dict[str, ast.expr] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            found[node.target.id] = node.value
    return found


def check_workload(source: str, workload: Workload) -> str | None:
    """Why `workload` cannot apply to `source`, or None when it can."""
    names = top_level_assignments(source)
    for key, value in workload.params.items():
        if key not in names:
            return f"workload {workload.name!r}: {key!r} is not assigned at the top level of the task source"
        if not _is_literal(value):
            return f"workload {workload.name!r}: the value of {key!r} is not a plain literal ({value!r})"
    return None


def apply_workload(source: str, workload: Workload) -> str:
    """The task source with the workload's values in place of the top-level assignments.

    Comments and layout elsewhere are kept; only the replaced values change. An empty
    workload returns `source` itself (the KernelBench single-shape case, byte for byte)."""
    if not workload.params:
        return source
    problem = check_workload(source, workload)
    if problem:
        raise ValueError(problem)
    names = top_level_assignments(source)
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    spans = []
    for key, value in workload.params.items():
        node = names[key]
        start = offsets[node.lineno - 1] + _char_col(lines[node.lineno - 1], node.col_offset)
        end = offsets[node.end_lineno - 1] + _char_col(lines[node.end_lineno - 1], node.end_col_offset)  # type: ignore[operator]
        spans.append((start, end, repr(value)))
    out = source
    for start, end, text in sorted(spans, reverse=True):
        out = out[:start] + text + out[end:]
    return out


def _char_col(line: str, byte_col: int) -> int:
    """ast columns count UTF-8 bytes; string slicing counts characters."""
    return len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))


def _is_literal(value: Any) -> bool:
    """repr(value) reads back as the same value (so the rewritten source says exactly it)."""
    if isinstance(value, float) and not math.isfinite(value):
        return False
    try:
        return ast.literal_eval(repr(value)) == value
    except (ValueError, SyntaxError, TypeError, RecursionError):
        return False


__all__ = ["Workload", "apply_workload", "check_workload", "top_level_assignments"]
