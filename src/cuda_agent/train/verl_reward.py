"""Stage 1 reward for verl (single-turn PPO warm-up): the response holds the whole candidate as
fenced code blocks; `cuda_agent.evaluate` scores them in a fresh workspace.

verl imports it as `pkg://cuda_agent.train.verl_reward` (a package module, so relative imports
work) and awaits `compute_score` with `reward_kwargs` merged in: the recipe puts the pool settings
there, so the evaluation runs on the job's shared GPU pool, never on the 0-GPU reward worker's
node; `pool_workers: 0` evaluates in-process through the agent loop's evaluator and its limit."""

from __future__ import annotations

import re
from typing import Any

from .eval_pool import PoolSettings, shared_evaluator
from .verl_data import task_from_extra_info

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


async def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None,
                        **kwargs: Any) -> float:
    task, backend = task_from_extra_info(extra_info or {})
    files = candidate_from_response(solution_str)
    if "model_new.py" not in files:
        return -1.0
    settings = PoolSettings.model_validate({k: v for k, v in kwargs.items() if k in PoolSettings.model_fields})
    cfg = settings.model_dump(mode="json")
    if not settings.uses_pool:
        cfg["eval"]["backend"] = backend
        cfg["local_concurrency"] = int(kwargs.get("local_concurrency", 1))
    result = await shared_evaluator(cfg).evaluate_files(task, backend, files)
    return float(result.reward)
