"""The judge's trials where a task's outputs are too large to hold (`TRIALS_HELD_BYTES`): each is made
again from its seed when used, forward included. Run with the judge's own methods on the CPU backend
(a review of issue 23's fourteenth session, `bench/redteam/review_2026-11-27s13/`)."""

from __future__ import annotations

import hashlib

import pytest
import torch

from cuda_agent.evaluation import judge as judge_module
from cuda_agent.evaluation.config import EvalConfig
from cuda_agent.evaluation.protocol import JudgeRequest

MATMUL_TASK = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, a, b):
        return a @ b

def get_inputs():
    return [torch.randn(64, 32), torch.randn(32, 48)]

def get_init_inputs():
    return []
'''

WRITES_SOME_INPUTS_TASK = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        if x[0, 0] > 0:  # an in-place write that depends on the values: only some seeds' inputs
            x.mul_(2)
        return x[:, :8] * 1.0

def get_inputs():
    return [torch.randn(64, 64)]

def get_init_inputs():
    return []
'''


@pytest.fixture()
def judge(monkeypatch):
    monkeypatch.setattr(judge_module, "TRIALS_HELD_BYTES", 0)  # neither the trials nor their outputs held
    made = judge_module.Judge("cpu")
    try:
        yield made
    finally:
        made.close()


def _request(source: str, cfg: EvalConfig) -> JudgeRequest:
    return JudgeRequest(config=cfg, task_source=source, task_hash=hashlib.sha1(source.encode()).hexdigest(),
                        workspace="/tmp")


def test_the_flops_are_one_forwards_where_nothing_is_held(judge) -> None:
    """`_count_flops` ran `trial(state, 0)`, itself a forward where nothing is held, inside the
    counter: twice the flops, and a speed-of-light bound (which caps the reward at 1) twice too high."""
    cfg = EvalConfig(backend="cpu")
    state = judge.task_state(_request(MATMUL_TASK, cfg), cfg)
    assert state.trials is None and state.refs is None
    judge._count_flops(state)
    assert state.work["flops"] == 2 * 64 * 32 * 48


def test_a_reference_that_writes_only_some_seeds_inputs_keeps_each_trial_true(judge) -> None:
    """Mutation was looked for on trial 0 alone where nothing is held: a forward that writes only
    some seeds' inputs gave those trials the written inputs beside the output of the unwritten,
    and verification failed the reference itself."""
    for seed in range(40, 400):  # trial 0 unwritten, a later one written
        cfg = EvalConfig(backend="cpu", seed=seed)
        writes = []
        for trial_seed in cfg.trial_seeds():
            torch.manual_seed(trial_seed)
            writes.append(bool(torch.randn(64, 64)[0, 0] > 0))
        if not writes[0] and any(writes[1:]):
            break
    else:
        pytest.fail("no config seed with trial 0 unwritten and a later trial written")
    state = judge.task_state(_request(WRITES_SOME_INPUTS_TASK, cfg), cfg)
    assert state.mutates and state.trials is None
    for i, trial_seed in enumerate(state.seeds):
        trial = judge.trial(state, i)
        pristine = judge._trial_inputs(state.module, trial_seed, state.dtype)
        assert torch.equal(trial.inputs[0], pristine[0]), f"trial {i}'s inputs are the written ones"
        assert torch.equal(trial.ref, state.reference(pristine[0].clone())), f"trial {i}"
