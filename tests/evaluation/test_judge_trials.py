"""The judge's trials where a task's outputs are too large to hold (`TRIALS_HELD_BYTES`): each is made
again from its seed when used, forward included. Run with the judge's own methods on the CPU backend
(a review of issue 23's fourteenth session, `bench/redteam/review_2026-11-27s13/`)."""

from __future__ import annotations

import hashlib
import os

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


REORDERS_SOME_INPUTS_TASK = WRITES_SOME_INPUTS_TASK.replace("x.mul_(2)", "x.copy_(x.flip(0))").replace(
    "return x[:, :8] * 1.0", "return x[:, :8] * 2.0")  # (the output read before the write moves nothing)


def _writes(cfg: EvalConfig) -> list[bool]:
    """Which of the config's trials draw values the tasks above write (x[0, 0] > 0)."""
    writes = []
    for trial_seed in cfg.trial_seeds():
        torch.manual_seed(trial_seed)
        writes.append(bool(torch.randn(64, 64)[0, 0] > 0))
    return writes


@pytest.mark.parametrize("source", [WRITES_SOME_INPUTS_TASK, REORDERS_SOME_INPUTS_TASK], ids=["scales", "reorders"])
def test_a_reference_that_writes_only_some_seeds_inputs_keeps_each_trial_true(judge, source: str) -> None:
    """Mutation was looked for on trial 0 alone where nothing is held: a forward that writes only
    some seeds' inputs gave those trials the written inputs beside the output of the unwritten,
    and verification failed the reference itself. A write that only reorders the words (rows
    reversed in place) kept a plain sum: the print is keyed by position (red team round 25, F2)."""
    for seed in range(40, 400):  # trial 0 unwritten, a later one written
        cfg = EvalConfig(backend="cpu", seed=seed)
        writes = _writes(cfg)
        if not writes[0] and any(writes[1:]):
            break
    else:
        pytest.fail("no config seed with trial 0 unwritten and a later trial written")
    state = judge.task_state(_request(source, cfg), cfg)
    assert state.mutates and state.trials is None
    for i, trial_seed in enumerate(state.seeds):
        trial = judge.trial(state, i)
        pristine = judge._trial_inputs(state.module, trial_seed, state.dtype)
        assert torch.equal(trial.inputs[0], pristine[0]), f"trial {i}'s inputs are the written ones"
        assert torch.equal(trial.ref, state.reference(pristine[0].clone())), f"trial {i}"


def test_a_secret_trial_whose_forward_wrote_its_inputs_is_not_held(monkeypatch) -> None:
    """Held, a secret trial came back with its inputs unwritten and no record of the write: a
    candidate that wrote its inputs as the reference does was -1 for "input mutation" on that draw
    (red team round 25, F1). It is made at verification instead, where the write is known."""
    monkeypatch.setattr(judge_module, "TRIALS_HELD_BYTES", 8 << 10)  # the trials too large, one output not
    judge = judge_module.Judge("cpu")
    try:
        cfg = next(c for c in (EvalConfig(backend="cpu", seed=s) for s in range(40, 4000)) if not any(_writes(c)))
        state = judge.task_state(_request(WRITES_SOME_INPUTS_TASK, cfg), cfg)
        assert not state.mutates and state.trials is None
        held = {}
        for draw in range(64):  # secret seeds whose values the forward writes, and ones it leaves alone
            seed = 10_000 + draw
            writes = bool(judge._trial_inputs(state.module, seed, state.dtype, True, state.fixed_parts)[0][0, 0] > 0)
            monkeypatch.setattr(judge_module.os, "urandom",
                                lambda n, real=os.urandom, s=seed: s.to_bytes(6, "little") if n == 6 else real(n))
            got, trial = judge.secret_trial(state)
            monkeypatch.undo()
            monkeypatch.setattr(judge_module, "TRIALS_HELD_BYTES", 8 << 10)
            assert got == seed
            held.setdefault(writes, []).append(trial is not None)
        assert held[False] and all(held[False]) and held[True] and not any(held[True])
    finally:
        judge.close()


def test_every_round_draws_its_values_seed_on_its_own(judge, tmp_path, cache_dir, fast_config, monkeypatch) -> None:
    """Each round's seed was the warm-up's plus 1 + r: a seed recovered from the warm-up's values
    (torch's host generator keeps 32 bits of it) gave every timed round's values in advance (red
    team round 25, F3). Each round's is now drawn from os.urandom on its own."""
    from tests.evaluation.test_weights_shared import LINEAR_NORM_TASK
    from tests.evaluation.test_weights_shared import _request as workspace_request

    seeds: list[int] = []
    real_round = judge_module.Judge._round

    def recording(self, state, cfg, base, cand, names, stack, positions, seed, *rest, **kw):  # type: ignore[no-untyped-def]
        seeds.append(seed)
        return real_round(self, state, cfg, base, cand, names, stack, positions, seed, *rest, **kw)

    monkeypatch.setattr(judge_module.Judge, "_round", recording)
    answer = judge.evaluate(workspace_request(tmp_path, cache_dir, fast_config, LINEAR_NORM_TASK, "linear_norm"))
    assert answer.correct, answer.reason
    assert len(seeds) >= judge_module.FUTILE_FROM  # the fewest rounds any stop allows
    steps = {b - a for a, b in zip(seeds, seeds[1:])}
    assert steps != {1} and len(set(seeds)) == len(seeds)
