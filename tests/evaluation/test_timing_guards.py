"""Timing hacks on the CPU backend: patched timers, content-fingerprint caching, work left
running on another thread, and the speed-of-light bound. Each one is caught or does not pay.
Since the judge times on its own clock in its own process, a patched clock in the candidate's
process changes nothing; the other hacks are in tests/evaluation/test_judge.py too."""

from __future__ import annotations

import pytest

from cuda_agent.evaluation import EvalConfig, GuardConfig, TimingConfig, evaluate

from tests.conftest import RELU_MODEL_NEW, RELU_TASK

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


def test_patched_timer_does_not_pay(make_workspace, fast_config):
    res = evaluate(make_workspace(model_new=TIMER_PATCH, name="timer"),
                   fast_config.model_copy(update={"guards": _guards()}))
    # the patch lands in the candidate's own process; the judge's clock is elsewhere
    assert res.correct and res.reward == 1 and res.speedup_vs_eager < 20, res.reason


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
    # a hit returns the memoised tensor again: a recycled output (issue 24) where one is caught,
    # else the misses' honest time
    recycled = on.reward == -1 and "recycled output" in on.reason
    assert recycled or (on.correct and on.reward == 1 and on.speedup_vs_eager < 1), on.reason
    off = evaluate(ws, fast_config.model_copy(update={"guards": _guards(fresh_values=False)}))
    # the hole the fresh values close: without them every call hits, and only the fresh-output
    # rule is left to catch it (the cache would pay several times over)
    assert off.reward == -1 and "recycled output" in off.reason, off.reason


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
        if self.calls <= 6:                       # honest while being verified (5 seeded trials, 1 secret)
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
    assert res.reward == -1 and "while being timed" in res.reason, res.reason


def test_speed_beyond_the_hardware_bound_is_not_credited(make_workspace, fast_config):
    ws = make_workspace(model_new=RELU_MODEL_NEW, task_source=BIG_RELU_TASK, name="sol")
    cfg = fast_config.model_copy(update={"guards": _guards(peak_scale=1e-9)})  # a bound no kernel meets
    res = evaluate(ws, cfg)
    assert res.correct and res.reward == 1, res.reason
    assert "speed of light" in res.reason and any("re-measured" in f for f in res.flags), res.reason
