"""A task's several workloads are judged together (`faster_over_workloads`): what holds a sole
workload's speed credit holds the joint claim's too (a review of the fifteenth session)."""

from __future__ import annotations

import pytest

from cuda_agent.backends import get_backend
from cuda_agent.evaluation import evaluator
from cuda_agent.evaluation.config import EvalConfig
from cuda_agent.evaluation.judge import _needs_solo
from cuda_agent.evaluation.protocol import JudgeAnswer
from cuda_agent.evaluation.records import EvalResult
from cuda_agent.tasks.workloads import Workload

ROUNDS = 30


def _answer(ratio: float, eager_alone_ms: float | None) -> JudgeAnswer:
    """A correct answer: eager 1 ms a call beside the candidate, the candidate `ratio` of that, and
    eager alone (the candidate's process gone) `eager_alone_ms`, where the judge timed it so."""
    eager = [1.0 + 0.001 * (i % 3) for i in range(ROUNDS)]
    return JudgeAnswer(correct=True, samples={"eager": eager, "candidate": [e * ratio for e in eager]},
                       solo={} if eager_alone_ms is None else {"eager": [eager_alone_ms] * 7})


def _judge_together(monkeypatch, make_workspace, answers: list[JudgeAnswer]) -> EvalResult:
    given = iter(answers)
    monkeypatch.setattr(evaluator, "_ask_workload", lambda *a, **k: next(given))
    ws = make_workspace()
    cfg = EvalConfig(backend="cpu", compile_mode=None)
    result = EvalResult(task=ws.task.name, task_hash=ws.task.content_hash, backend="cpu")
    runs = [(Workload(name=f"w{i}"), False) for i in range(len(answers))]
    evaluator._run_workloads(ws, ws.task, runs, get_backend("cpu"), cfg, ws.root, None, result)
    return result


def test_a_baseline_slowed_beside_the_candidate_on_one_workload_takes_the_joint_credit(monkeypatch,
                                                                                        make_workspace):
    honest = _judge_together(monkeypatch, make_workspace, [_answer(0.6, 0.95), _answer(0.6, 0.95)])
    assert honest.correct and honest.reward == 2, honest.reason
    slowed = _judge_together(monkeypatch, make_workspace, [_answer(0.6, 0.95), _answer(0.6, 0.5)])
    assert slowed.correct and slowed.reward == 1, slowed.reason
    assert "on workload 'w1', not credited as faster than eager" in slowed.reason


def test_a_baseline_slowed_where_the_candidate_is_slower_takes_the_joint_credit_too(monkeypatch, make_workspace):
    """The joint claim is a geometric mean: 0.5x and 2.5x is not faster, but eager slowed 2x on the second
    (the candidate still slower there, 1.25x) made it reward 2 (a review of the fifteenth session)."""
    honest = _judge_together(monkeypatch, make_workspace, [_answer(0.5, 0.95), _answer(2.5, 0.95)])
    assert honest.correct and honest.reward == 1, honest.reason
    slowed = _judge_together(monkeypatch, make_workspace, [_answer(0.5, 0.95), _answer(1.25, 0.5)])
    assert slowed.correct and slowed.reward == 1, slowed.reason
    assert "on workload 'w1', not credited as faster than eager" in slowed.reason


@pytest.mark.parametrize("ratio, sole, needed", [
    (0.97, True, False),   # not clearly faster alone: nothing for the solo rounds to decide
    (0.97, False, True),   # one of several: every workload counts in the joint claim, so its baselines are timed alone
    (1.25, False, True),   # ... a slower one too (a slowed baseline there buys joint speed)
    (0.6, True, True),
])
def test_the_baselines_are_timed_alone_wherever_a_workload_counts(ratio, sole, needed):
    eager = [1.0 + 0.02 * ((i * 7) % 5 - 2) for i in range(ROUNDS)]
    samples = {"eager": eager, "candidate": [e * ratio * (1 + 0.03 * ((i * 3) % 5 - 2)) for i, e in enumerate(eager)]}
    assert _needs_solo(samples, EvalConfig(backend="cpu"), sole) is needed
