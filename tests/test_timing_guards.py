"""Timing hacks on the CPU backend: patched timers, content-fingerprint caching, work left
running on another thread, hidden device work (cross-check arithmetic), and the
speed-of-light bound. Each one is caught or does not pay, and the reason names it."""

from __future__ import annotations

import threading
import time

import pytest

from cuda_agent.evaluation import EvalConfig, GuardConfig, TimingConfig, evaluate
from cuda_agent.evaluation.evaluator import _host_clock_cross_check
from cuda_agent.evaluation.guards import GuardViolation
from cuda_agent.evaluation.integrity import thread_count
from cuda_agent.evaluation.records import EvalResult
from cuda_agent.evaluation.worker import _no_lingering_threads

from .conftest import RELU_MODEL_NEW, RELU_TASK

pytestmark = pytest.mark.slow


def _guards(**kw) -> GuardConfig:
    return GuardConfig(static_checks=False, **kw)


TIMER_PATCH = '''
import sys
import torch.nn as nn
import cpu_extension

_cpu = sys.modules["cuda_agent.backends.cpu"]
_real = _cpu._clock
_cpu._clock = lambda: _real() // 1000   # every trial now looks 1000x shorter

class ModelNew(nn.Module):
    def forward(self, x):
        return cpu_extension.relu(x.contiguous())
'''


def test_patched_timer_is_caught(make_workspace, fast_config):
    res = evaluate(make_workspace(model_new=TIMER_PATCH, name="timer"),
                   fast_config.model_copy(update={"guards": _guards()}))
    assert res.reward == -1 and "timer patched" in res.reason and "_clock" in res.reason, res.reason


BIG_RELU_TASK = RELU_TASK.replace("torch.randn(64, 1024)", "torch.randn(2048, 2048)")

FINGERPRINT_CACHE = '''
import time
import torch.nn as nn
import cpu_extension

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.memo = {}

    def forward(self, x):
        key = tuple(x[0, :16].tolist())          # a cheap fingerprint of the content
        hit = self.memo.get(key)
        if hit is not None:
            return hit
        time.sleep(0.004)                         # a slow honest path
        out = cpu_extension.relu(x.contiguous())
        self.memo[key] = out
        return out
'''


def test_fingerprint_caching_does_not_pay(make_workspace, fast_config):
    ws = make_workspace(model_new=FINGERPRINT_CACHE, task_source=BIG_RELU_TASK, name="fingerprint")
    on = evaluate(ws, fast_config.model_copy(update={"guards": _guards()}))
    assert on.correct and on.reward == 1 and on.speedup_vs_eager < 1, on.reason
    off = evaluate(ws, fast_config.model_copy(update={"guards": _guards(fresh_values=False)}))
    assert off.reward >= 2, off.reason  # the hole the fresh values close


ASYNC_THREAD = '''
import threading, time
import torch
import torch.nn as nn
import cpu_extension

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls <= 5:                       # honest while being verified
            return cpu_extension.relu(x.contiguous())
        out = torch.empty_like(x)
        def work():
            time.sleep(0.02)
            out.copy_(cpu_extension.relu(x.contiguous()))
        threading.Thread(target=work).start()     # the timer stops before the work is done
        return out
'''


def test_work_left_running_on_a_thread_is_caught(make_workspace, fast_config):
    res = evaluate(make_workspace(model_new=ASYNC_THREAD, name="thread"),
                   fast_config.model_copy(update={"guards": _guards()}))
    assert res.reward == -1 and "another thread" in res.reason, res.reason


def test_lingering_thread_check_passes_joined_threads():
    def joined():
        t = threading.Thread(target=time.sleep, args=(0.01,))
        t.start()
        t.join()
        return 1

    def detached():
        threading.Thread(target=time.sleep, args=(0.3,)).start()
        return 1

    assert _no_lingering_threads(joined, thread_count)() == 1
    with pytest.raises(GuardViolation, match="another thread"):
        _no_lingering_threads(detached, thread_count)()


def test_host_clock_cross_check_counts_hidden_work():
    honest = {"eager": [1.0] * 9, "candidate": [0.5] * 9, "host:eager": [1.03] * 9, "host:candidate": [0.54] * 9}
    r = EvalResult(task="t", task_hash="h", backend="cuda")
    _host_clock_cross_check(r, EvalConfig(), honest)
    assert honest["candidate"] == [0.5] * 9 and not r.flags  # launch overhead alike: nothing counted
    hidden = {"eager": [1.0] * 9, "candidate": [0.1] * 9, "host:eager": [1.03] * 9, "host:candidate": [1.2] * 9}
    _host_clock_cross_check(r, EvalConfig(), hidden)
    assert hidden["candidate"][0] == pytest.approx(0.1 + 1.07) and "another stream" in r.flags[0]
    assert "host:candidate" not in hidden


def test_speed_beyond_the_hardware_bound_is_not_credited(make_workspace, fast_config):
    ws = make_workspace(model_new=RELU_MODEL_NEW, task_source=BIG_RELU_TASK, name="sol")
    cfg = fast_config.model_copy(update={"guards": _guards(peak_scale=1e-9)})  # a bound no kernel meets
    res = evaluate(ws, cfg)
    assert res.correct and res.reward == 1, res.reason
    assert "speed of light" in res.reason and any("re-measured" in f for f in res.flags), res.reason
