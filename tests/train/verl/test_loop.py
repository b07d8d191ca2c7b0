"""The verl engine's agent loop and stage-1 reward, without a cluster."""

from __future__ import annotations

import asyncio

import pytest

from cuda_agent.tasks import Task
from tests.conftest import RELU_KERNEL, RELU_MODEL_NEW, RELU_TASK


def test_verl_agent_loop_registers_when_verl_is_installed():
    pytest.importorskip("verl")
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry

    from cuda_agent.train.verl import loop as verl_loop

    assert _agent_loop_registry["cuda_agent"]["_target_"].endswith("verl.loop.CudaAgentLoop")
    assert issubclass(verl_loop.CudaAgentLoop, verl_loop.AgentLoopBase)


def test_stage_one_reward_without_a_pool_goes_through_the_evaluators_limit(monkeypatch):
    """`pool_workers: 0`: the reward is evaluated in this process by the shared evaluator, at
    most `local_concurrency` at a time, on a workspace holding the response's files."""
    from cuda_agent.evaluation import EvalResult
    from cuda_agent.train.verl import eval_pool
    from cuda_agent.train.verl.data import task_row
    from cuda_agent.train.verl.reward import compute_score

    running, most, seen = [0], [0], []

    def fake_evaluate(ws, config):
        running[0] += 1
        most[0] = max(most[0], running[0])
        seen.append((ws.root / "model_new.py").read_text())
        import time
        time.sleep(0.05)
        running[0] -= 1
        return EvalResult(task=ws.task.name, task_hash="h", backend=ws.backend, reward=2)

    from cuda_agent.evaluation import evaluator

    monkeypatch.setattr(evaluator, "evaluate", fake_evaluate)  # evaluate_files (evaluation/files.py) calls it
    monkeypatch.setattr(eval_pool, "_EVALUATORS", {})
    row = task_row(Task.from_source(RELU_TASK, name="relu"), "cpu", single_turn=True)
    answer = f"```python\n{RELU_MODEL_NEW}```\n```cpp\n// relu.cpp\n{RELU_KERNEL}```\n"

    async def three() -> list[float]:
        return await asyncio.gather(*[compute_score("x", answer, "", row["extra_info"], pool_workers=0)
                                      for _ in range(3)])

    assert asyncio.run(three()) == [2.0, 2.0, 2.0]
    assert most[0] == 1 and seen == [RELU_MODEL_NEW] * 3
