"""Two of the judge's timing guards as units, without a judge process: new input values every
round (`Judge.fresh_inputs`) and every call of a timed batch compared (`check_round`). Each
was caught before only by one end-to-end test. (These call the methods on a stand-in `self`
holding just what they read; the judge's process and device are not needed.)"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from cuda_agent.evaluation.judge import Judge, Verdict, _CandidateSession
from cuda_agent.evaluation.verify import Tolerance


def _judge() -> SimpleNamespace:
    return SimpleNamespace(torch=torch, device=torch.device("cpu"),
                           _unit_interval=lambda x: bool(x.min() >= 0) and bool(x.max() <= 1))


def _fresh(stack: list, seed: int, vary: bool = True) -> list:
    return Judge.fresh_inputs(_judge(), stack, seed, vary)  # type: ignore[arg-type]


M = 6  # calls per timed batch


def test_every_round_gets_new_values_for_every_call() -> None:
    stack = [torch.randn(M, 64, 32)]
    a, b = _fresh(stack, 1)[0], _fresh(stack, 2)[0]
    assert not torch.equal(a, stack[0]) and not torch.equal(a, b)
    # each call of the batch moves, and moves differently from the others
    for s in range(M):
        assert not torch.allclose(a[s], stack[0][s], atol=1e-2, rtol=1e-2)
    ratio = a / stack[0]
    assert not torch.allclose(ratio[0], ratio[1])
    assert torch.equal(_fresh(stack, 1)[0], a)  # the seed decides (it is secret, drawn per evaluation)


def test_the_scale_is_elementwise_in_0_8_to_1_2_keeping_signs_and_zeros() -> None:
    x = torch.randn(M, 4096)
    x[:, :16] = 0.0
    ratio = (_fresh([x], 7)[0] / x)[:, 16:]
    assert float(ratio.min()) >= 0.8 - 1e-6 and float(ratio.max()) <= 1.2 + 1e-6
    assert float(ratio.min()) < 0.82 and float(ratio.max()) > 1.18  # the whole range is used
    assert float(ratio.std()) > 0.1  # elementwise, not one factor per tensor
    out = _fresh([x], 7)[0]
    assert torch.equal(out[:, :16], torch.zeros(M, 16)) and torch.equal(out.sign(), x.sign())


def test_inputs_in_the_unit_interval_stay_in_it() -> None:
    p = torch.rand(M, 1000)
    out = _fresh([p], 3)[0]
    assert float(out.max()) <= 1.0 and float(out.min()) >= 0.0
    ratio = out / p
    assert float(ratio.min()) >= 0.8 - 1e-6 and float(ratio.max()) <= 1.0 + 1e-6


def test_integers_and_non_tensors_pass_unchanged_and_dtypes_are_kept() -> None:
    ids, half = torch.arange(M * 8).reshape(M, 8), torch.randn(M, 8).half()
    out = _fresh([ids, 3, half], 5)
    assert torch.equal(out[0], ids) and out[1] == 3 and out[2].dtype == torch.float16
    assert out[0] is not ids  # fresh memory every round


def test_without_fresh_values_the_stack_is_copied_as_it_is() -> None:
    x = torch.randn(M, 8)
    out = _fresh([x], 5, vary=False)[0]
    assert torch.equal(out, x)  # the stack itself may come back: it is only ever staged by copy


# ---- every call of a batch is compared ----------------------------------------------------
def _session(pending: list) -> SimpleNamespace:
    return SimpleNamespace(torch=torch, pending=pending, tol=Tolerance())


@pytest.mark.parametrize("bad", range(M))
def test_a_wrong_output_on_any_call_of_the_batch_is_caught(bad: int) -> None:
    refs = [torch.randn(16, 16) for _ in range(M)]
    got = [r.clone() for r in refs]
    got[bad] = refs[(bad + 1) % M].clone()  # an output cached from another call
    with pytest.raises(Verdict, match=rf"round 4, call {bad}:"):
        _CandidateSession.check_round(_session(got), refs, 4)  # type: ignore[arg-type]


def test_a_right_batch_passes_and_is_released() -> None:
    refs = [torch.randn(16, 16) for _ in range(M)]
    session = _session([r + 1e-4 for r in refs])
    _CandidateSession.check_round(session, refs, 0)  # type: ignore[arg-type]
    assert session.pending == []


def test_a_batch_with_a_missing_or_mixed_output_is_caught() -> None:
    refs = [torch.randn(4) for _ in range(3)]
    with pytest.raises(Verdict):
        _CandidateSession.check_round(_session([refs[0], refs[1], torch.randn(5)]), refs, 1)  # type: ignore[arg-type]
    with pytest.raises(Verdict):
        _CandidateSession.check_round(_session([refs[0], refs[1], refs[2].double()]), refs, 1)  # type: ignore[arg-type]
