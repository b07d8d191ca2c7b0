"""Where episode rewards are computed: in this process, or on a separate pool of GPU workers.

Why a pool: at cluster scale the rollout GPUs serve the policy; if every trajectory's final
evaluation (build, verify, time) ran on the rollout node, rollouts would queue behind one
device and timing would be disturbed by inference. `RayEvaluatorPool` ships the candidate's
files (model_new.py + kernels/, a few KB) to Ray actors that each own one GPU, rebuild the
workspace there from the task source and run `cuda_agent.evaluate`; at most one evaluation per
device at a time, so timings stay clean. `LocalEvaluator` does the same in-process for one GPU.
Both are awaited from asyncio agent loops without blocking them.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any, Protocol

from ..evaluation import EvalConfig, EvalResult, evaluate
from ..tasks import Task
from ..workspace import Workspace, create_workspace


class Evaluator(Protocol):
    async def evaluate(self, ws: Workspace) -> EvalResult: ...


def candidate_files(ws: Workspace) -> dict[str, str]:
    """The agent-owned files that define a candidate: model_new.py and kernels/*."""
    files = {"model_new.py": (ws.root / "model_new.py").read_text(errors="replace")}
    kernels = ws.root / "kernels"
    if kernels.is_dir():
        for f in sorted(kernels.iterdir()):
            if f.is_file() and f.stat().st_size < 2_000_000:
                files[f"kernels/{f.name}"] = f.read_text(errors="replace")
    return files


def evaluate_files(task: Task, backend: str, files: dict[str, str], config: EvalConfig) -> EvalResult:
    """Rebuild a fresh workspace from the task and the candidate files, then evaluate it."""
    with tempfile.TemporaryDirectory(prefix="cuda-agent-eval-") as tmp:
        ws = create_workspace(task, Path(tmp) / "ws", backend)
        for rel, text in files.items():
            if rel != "model_new.py" and not (rel.startswith("kernels/") and "/" not in rel[len("kernels/"):]):
                continue  # only agent-owned paths travel; anything else is ignored
            (ws.root / rel).write_text(text)
        return evaluate(ws, config)


class LocalEvaluator:
    """Evaluate in this process (a worker subprocess per evaluation, as `evaluate` does), at most
    `max_concurrent` at a time so device timings do not overlap."""

    def __init__(self, config: EvalConfig | None = None, max_concurrent: int = 1):
        self.config = config or EvalConfig()
        self._sem = asyncio.Semaphore(max_concurrent)

    async def evaluate(self, ws: Workspace) -> EvalResult:
        async with self._sem:
            return await asyncio.get_running_loop().run_in_executor(None, evaluate, ws, self.config)


class RayEvaluatorPool:
    """A pool of Ray actors, one GPU each (`num_gpus` per actor; 0 for CPU-backend pools)."""

    def __init__(self, num_workers: int, config: EvalConfig | None = None, *, num_gpus: float = 1.0,
                 num_cpus: float = 4.0, resources: dict[str, float] | None = None):
        import ray

        self.config = config or EvalConfig()
        actor_cls = ray.remote(num_gpus=num_gpus, num_cpus=num_cpus, resources=resources or {})(_EvalActor)
        self._actors = [actor_cls.remote(self.config.model_dump_json()) for _ in range(num_workers)]
        self._idle: asyncio.Queue[Any] | None = None

    async def evaluate(self, ws: Workspace) -> EvalResult:
        if self._idle is None:
            self._idle = asyncio.Queue()
            for a in self._actors:
                self._idle.put_nowait(a)
        actor = await self._idle.get()
        try:
            raw = await actor.evaluate.remote(ws.task.model_dump_json(), ws.backend, candidate_files(ws))
        finally:
            self._idle.put_nowait(actor)
        return EvalResult.model_validate_json(raw)


class _EvalActor:
    """Runs on a pool node; everything crosses as JSON so no pickled objects from rollouts are trusted."""

    def __init__(self, config_json: str):
        self.config = EvalConfig.model_validate_json(config_json)

    def evaluate(self, task_json: str, backend: str, files: dict[str, str]) -> str:
        task = Task.model_validate_json(task_json)
        return evaluate_files(task, backend, files, self.config).model_dump_json()


__all__ = ["Evaluator", "LocalEvaluator", "RayEvaluatorPool", "candidate_files", "evaluate_files"]
