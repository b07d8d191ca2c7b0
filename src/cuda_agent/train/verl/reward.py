"""Stage 1 reward for verl (single-turn PPO warm-up): the response holds the whole candidate as
fenced code blocks; `cuda_agent.evaluate` scores them in a fresh workspace.

verl imports it as `pkg://cuda_agent.train.verl.reward` (a package module, so relative imports
work) and awaits `compute_score` with `reward_kwargs` merged in: the recipe puts the pool settings
there, so the evaluation runs on the job's shared GPU pool, never on the 0-GPU reward worker's
node; `pool_workers: 0` evaluates in-process through the agent loop's evaluator and its limit."""

from __future__ import annotations

from typing import Any

from ..evaluator import candidate_from_response
from .data import task_from_extra_info
from .eval_pool import PoolSettings, shared_evaluator


async def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None,
                        **kwargs: Any) -> float:
    task, backend = task_from_extra_info(extra_info or {})
    files = candidate_from_response(solution_str)
    if "model_new.py" not in files:
        return -1.0
    settings = PoolSettings.model_validate(kwargs)  # extra="ignore": verl's other reward_kwargs are not ours
    cfg = settings.model_dump(mode="json")
    if not settings.uses_pool:
        cfg["eval"]["backend"] = backend
        cfg["local_concurrency"] = int(kwargs.get("local_concurrency", 1))
    result = await shared_evaluator(cfg).evaluate_files(task, backend, files)
    return float(result.reward)
