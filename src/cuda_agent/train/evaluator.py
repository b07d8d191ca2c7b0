"""Where an episode's reward is computed, for every engine: the `Evaluator` protocol, in-process evaluation,
and a candidate's files from a workspace or a single-turn response (verl adds a pool: `verl/eval_pool.py`).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any, Protocol

from ..agent.snapshots import candidate_files as agent_candidate_files
from ..evaluation import EvalConfig, EvalResult, evaluate, evaluate_files
from ..tasks import Task
from ..workspace import Workspace


class Evaluator(Protocol):
    async def evaluate(self, ws: Workspace) -> EvalResult: ...

    async def evaluate_files(self, task: Task, backend: str, files: dict[str, str]) -> EvalResult: ...


MAX_FILE_BYTES = 2_000_000


def candidate_files(ws: Workspace) -> dict[str, str]:
    """The agent-owned files that define a candidate (the agent's own rule), as text."""
    return {rel: (ws.root / rel).read_text(errors="replace") for rel in agent_candidate_files(ws.root)
            if (ws.root / rel).stat().st_size < MAX_FILE_BYTES}  # no source is this big: junk stays home


_BLOCK = re.compile(r"```[a-zA-Z+]*\n(.*?)```", re.DOTALL)
_NAME = re.compile(r"^\s*(?://|#)\s*((?:kernels/)?[\w.-]+\.(?:cu|cpp|h|cuh|py))\s*$")


def candidate_from_response(text: str) -> dict[str, str]:
    """model_new.py = the block defining ModelNew; kernels/X = a block whose first line names X."""
    files: dict[str, str] = {}
    for body in _BLOCK.findall(text):
        first, _, rest = body.partition("\n")
        m = _NAME.match(first)
        if m:
            name = m.group(1)
            files[name if name.startswith("kernels/") or name == "model_new.py" else f"kernels/{name}"] = rest
        elif "class ModelNew" in body:
            files["model_new.py"] = body
    return files


class LocalEvaluator:
    """Evaluate in this process (a worker subprocess per evaluation, as `evaluate` does), at most
    `max_concurrent` at a time so device timings do not overlap."""

    def __init__(self, config: EvalConfig | None = None, max_concurrent: int = 1):
        self.config = config or EvalConfig()
        self._sem = asyncio.Semaphore(max_concurrent)

    async def evaluate(self, ws: Workspace) -> EvalResult:
        return await self._run(evaluate, ws, self.config)

    async def evaluate_files(self, task: Task, backend: str, files: dict[str, str]) -> EvalResult:
        return await self._run(evaluate_files, task, backend, files, self.config)

    async def _run(self, fn: Any, *args: Any) -> EvalResult:
        async with self._sem:
            return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


__all__ = ["Evaluator", "LocalEvaluator", "candidate_files", "candidate_from_response"]
