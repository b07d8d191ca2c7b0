"""A TRL reward function that scores completions on a `cuda-agent serve` service.

    from cuda_agent.train.trl.reward import service_reward
    trainer = GRPOTrainer(..., reward_funcs=[service_reward("http://evalhost:8765")])

Each dataset row names its task in a column (`task`: a name the server knows, or a task
source); a completion carries the candidate as fenced code blocks (the stage-1 format,
`train.evaluator.candidate_from_response`). The rows of a batch are evaluated concurrently: the
service queues them on its judges."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from ...evaluation import EvalConfig
from ..evaluator import candidate_from_response


def service_reward(url: str | None = None, token: str | None = None, *, task_column: str = "task",
                   config: EvalConfig | None = None, concurrency: int = 32,
                   timeout_s: float = 3600.0) -> Callable[..., list[float]]:
    """`reward(prompts, completions, **columns) -> list[float]`: the milestone reward per completion;
    -1 for a completion without `ModelNew` or one the service could not judge."""
    from ...serve.client import ServiceClient, ServiceError

    client = ServiceClient(url, token)

    def score(task: str, completion: Any) -> float:
        text = completion if isinstance(completion, str) else "".join(m.get("content", "") for m in completion)
        files = candidate_from_response(text)
        if "model_new.py" not in files:
            return -1.0
        try:
            return float(client.evaluate(task, files, config, timeout_s=timeout_s).reward)
        except ServiceError as exc:
            if exc.status in (401, 413, 422):  # our request is wrong: say so, do not train on it
                raise
            return -1.0

    def reward(prompts: list[Any], completions: list[Any], **columns: Any) -> list[float]:
        tasks = columns.get(task_column)
        if tasks is None:
            raise KeyError(f"the dataset has no {task_column!r} column naming each row's task")
        with ThreadPoolExecutor(max(1, min(concurrency, len(completions)))) as pool:
            return list(pool.map(score, tasks, completions))

    reward.__name__ = "cuda_agent_service_reward"
    return reward


__all__ = ["service_reward"]
