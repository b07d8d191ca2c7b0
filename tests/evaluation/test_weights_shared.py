"""The judge's reference reading the baseline arena's parameters (`Judge.weights_in_arena`), end to end.

On a GPU the judge shares them (`Judge.shares_weights`); here the same flow runs on the CPU backend with
sharing turned on, so the whole path (the reference phase's print, the load into the arena, the checks
after verification, after the timing and at the end, the task kept warm) runs with the judge's own
methods, not only piece by piece: a slip in it (the print key taking the task key's name, so no task
stayed warm) passed every unit test."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.benchmark.jobs import reference_model_new
from tests.conftest import cpu_workspace

LINEAR_NORM_TASK = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(64, 32)
        self.norm = nn.BatchNorm1d(32)

    def forward(self, x):
        return self.norm(self.lin(x))

def get_inputs():
    return [torch.randn(16, 64)]

def get_init_inputs():
    return []
'''

EMBEDDING_MAX_NORM_TASK = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(1000, 16, max_norm=1.0)

    def forward(self, idx):
        return self.emb(idx)

def get_inputs():
    return [torch.randint(0, 1000, (64,))]

def get_init_inputs():
    return []
'''


RARE_OVER_NORM_TASK = EMBEDDING_MAX_NORM_TASK.replace("nn.Embedding(1000, 16, max_norm=1.0)",
                                                    "nn.Embedding(20000, 32, max_norm=7.34)").replace(
    "torch.randint(0, 1000, (64,))", "torch.randint(0, 20000, (8, 4))")  # ~1% of rows over the norm

LAZY_TASK = LINEAR_NORM_TASK.replace("nn.Linear(64, 32)", "nn.LazyLinear(32)")


def _request(root: Path, cache_dir: Path, cfg: object, task_source: str, name: str) -> object:
    """The judge request for the reference as its own solution, built and published as `evaluate` does."""
    from cuda_agent.backends import get_backend
    from cuda_agent.benchmark.solutions import reference_config
    from cuda_agent.evaluation.evaluator import _baseline_key, _judge_request
    from cuda_agent.languages import get_language

    cfg = reference_config(cfg)  # the task's own torch code as the solution: the rules a harness check uses
    ws = cpu_workspace(root / name, cache_dir, reference_model_new(task_source), task_source=task_source, name=name)
    backend, lang = get_backend("cpu"), get_language(ws.language)
    build = lang.build(ws.root, backend, cache_dir=cache_dir, timeout_s=300)
    assert build.ok, build.log
    lang.publish(ws.root, backend, build.library)
    return _judge_request(ws, ws.task, backend, cfg, cache_dir,
                          _baseline_key(ws.task.content_hash, backend, cfg, None), build.library)


@pytest.fixture()
def sharing_judge():
    from cuda_agent.evaluation.judge import Judge

    judge = Judge("cpu")
    judge.shares_weights = True  # as on a GPU
    try:
        yield judge
    finally:
        judge.close()


def test_a_task_whose_reference_reads_the_arenas_parameters_stays_warm_and_keeps_its_reward(
        sharing_judge, tmp_path: Path, cache_dir: Path, fast_config) -> None:
    req = _request(tmp_path, cache_dir, fast_config, LINEAR_NORM_TASK, "linear_norm")
    first = sharing_judge.evaluate(req)
    assert first.correct, first.reason
    state = sharing_judge.state
    assert state is not None and state.weights_from is not None and not state.writes_weights
    second = sharing_judge.evaluate(req)  # warm: the same task state, the parameters still the arena's
    assert second.correct, second.reason
    assert sharing_judge.state is state and state.weights_from is not None
    assert sharing_judge.weights_unchanged(state)


def test_a_reference_that_writes_its_parameters_keeps_its_own_and_the_candidate_its_reward(
        sharing_judge, tmp_path: Path, cache_dir: Path, fast_config) -> None:
    """`nn.Embedding(max_norm=...)` renormalises the rows it reads: shared, the weights check took an
    honest candidate's reward (a review of issue 23's thirteenth session)."""
    req = _request(tmp_path, cache_dir, fast_config, EMBEDDING_MAX_NORM_TASK, "embedding_max_norm")
    for _ in range(2):
        answer = sharing_judge.evaluate(req)
        assert answer.correct, answer.reason
        assert sharing_judge.state.writes_weights and sharing_judge.state.weights_from is None


def test_a_reference_that_writes_parameters_the_reference_phase_never_read_keeps_every_reward(
        sharing_judge, tmp_path: Path, cache_dir: Path, fast_config) -> None:
    """Red team round 24, H1: with ~1% of an Embedding's rows over `max_norm`, the trials' seeds read
    none of them, the parameters were shared, and a later draw renormalised one in the arena: 6 of 14
    honest evaluations were -1 ("the task's weights changed"). A change is no verdict: the task is made
    anew, its parameters never shared again."""
    req = _request(tmp_path, cache_dir, fast_config, RARE_OVER_NORM_TASK, "rare_over_norm")
    for _ in range(6):
        answer = sharing_judge.evaluate(req)
        assert answer.correct, answer.reason


def test_a_lazy_reference_keeps_its_own_parameters_and_its_reward(
        sharing_judge, tmp_path: Path, cache_dir: Path, fast_config) -> None:
    """Red team round 24, M1: a LazyLinear's parameter has no bits to print before its first forward;
    the print raised and every evaluation was the judge's error."""
    req = _request(tmp_path, cache_dir, fast_config, LAZY_TASK, "lazy")
    answer = sharing_judge.evaluate(req)
    assert answer.correct, answer.reason
    assert sharing_judge.state.writes_weights and sharing_judge.state.weights_from is None


def test_a_task_no_evaluation_follows_is_forgotten_once_answered_and_kept_otherwise(
        sharing_judge, tmp_path: Path, cache_dir: Path, fast_config) -> None:
    """`EvalConfig.keep_task_warm` off (a benchmark's one evaluation per task): the judge drops the
    task and its baseline client after answering (`Judge.after_answer`), not at the next task's start
    where it sat on the critical path (issue 23); on (an RL group, an agent's turns) it stays warm."""
    req = _request(tmp_path, cache_dir, fast_config, LINEAR_NORM_TASK, "linear_norm")
    answer = sharing_judge.evaluate(req)
    assert answer.correct, answer.reason
    sharing_judge.after_answer(req)  # kept: the default
    assert sharing_judge.state is not None and sharing_judge.baseline is not None
    last = req.model_copy(update={"config": req.config.model_copy(update={"keep_task_warm": False})})
    answer = sharing_judge.evaluate(last)  # still warm for this one: the same task
    assert answer.correct, answer.reason
    client = sharing_judge.baseline.link
    sharing_judge.after_answer(last)
    assert sharing_judge.state is None and sharing_judge.baseline is None
    assert any(link is client for link, _ in sharing_judge.retired) or not client.alive()
    answer = sharing_judge.evaluate(last)  # made anew, with its reward
    assert answer.correct, answer.reason


def test_the_judge_process_forgets_a_task_after_answering_where_none_follows(make_workspace, fast_config) -> None:
    """Through the judge process (`judge.main` calls `after_answer`): after an evaluation whose config
    says no evaluation of the task follows, the next one starts both clients anew (the baseline's
    too); kept warm, a re-evaluation takes only the candidate's."""
    from cuda_agent.evaluation import evaluate

    ws = make_workspace()
    cold = fast_config.model_copy(update={"keep_task_warm": False})
    roles = []
    for cfg in (fast_config, fast_config, cold, fast_config):
        result = evaluate(ws, cfg)
        assert result.correct, result.reason
        roles.append(sorted(c.get("role", "?") for c in result.judge.get("clients", [])))
    assert roles[1] == ["candidate"]  # warm: the baseline client kept
    assert roles[2] == ["candidate"]  # still warm for the last one itself
    assert roles[3] == ["baseline", "candidate"]  # forgotten once it answered
