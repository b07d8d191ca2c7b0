"""Stage 1 reward for verl (single-turn PPO warm-up): the response holds the whole candidate as
fenced code blocks; they are written into a fresh workspace and `cuda_agent.evaluate` scores it.

verl loads it as `reward.custom_reward_function.path: pkg://cuda_agent.train.verl_reward`
(verl's `load_extern_object` imports it as a package module, so the relative imports below
work; a file path would load it without its package). `compute_score` is async, so verl's
reward loop awaits it; verl merges `custom_reward_function.reward_kwargs` into the call, and the
recipe puts the pool settings there: the evaluation goes to the job's shared evaluation pool
(GPU actors on `cuda_agent_eval` nodes, the same pool stages 3-4 use), never onto the 0-GPU
reward worker's node. `pool_workers: 0` evaluates in-process instead (tests, one machine), through
the same per-process evaluator and its limit (`local_concurrency`, default 1) as the agent loop."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

from ..workspace import create_workspace
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
    if settings.uses_pool:
        pool = shared_evaluator(settings.model_dump(mode="json"))
        result = await pool.evaluate_files(task, backend, files)
    else:
        cfg = settings.model_dump(mode="json")
        cfg["eval"]["backend"] = backend
        cfg["local_concurrency"] = int(kwargs.get("local_concurrency", 1))
        with tempfile.TemporaryDirectory(prefix="cuda-agent-eval-") as tmp:
            ws = create_workspace(task, Path(tmp) / "ws", backend)
            for rel, text in files.items():  # model_new.py and kernels/<name> only (candidate_from_response)
                (ws.root / rel).write_text(text)
            result = await shared_evaluator(cfg).evaluate(ws)
    return float(result.reward)
