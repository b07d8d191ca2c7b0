"""Stage 1 reward for verl (single-turn PPO warm-up): the response holds the whole candidate as
fenced code blocks; they are written into a fresh workspace and `cuda_agent.evaluate` scores it.
verl calls `compute_score(data_source, solution_str, ground_truth, extra_info)`."""

from __future__ import annotations

import re
from typing import Any

from ..evaluation import EvalConfig
from .evaluator import evaluate_files
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


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None,
                  **kwargs: Any) -> float:
    task, backend = task_from_extra_info(extra_info or {})
    files = candidate_from_response(solution_str)
    if "model_new.py" not in files:
        return -1.0
    return float(evaluate_files(task, backend, files, EvalConfig(backend=backend)).reward)
