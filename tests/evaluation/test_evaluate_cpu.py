"""End to end on the CPU backend: real compiler, real worker process, real reward."""

from __future__ import annotations

import stat

import pytest

from cuda_agent.evaluation import evaluate
from cuda_agent.evaluation.config import GuardConfig

from tests.conftest import RELU_BINDING, RELU_KERNEL, RELU_MODEL_NEW, RELU_TASK

pytestmark = pytest.mark.slow


def test_good_solution_is_rewarded(make_workspace, fast_config):
    res = evaluate(make_workspace(), fast_config)
    assert res.reward >= 1, res.reason + res.worker_log
    assert res.compiled and res.correct
    assert len(res.trials) == 6 and all(t.ok for t in res.trials)  # 5 seeded trials and a secret one
    assert len({t.seed for t in res.trials}) == 6
    assert res.time_ms.eager and res.time_ms.candidate and res.speedup_vs_eager
    assert res.candidate_stats.trials >= 5  # fewer than min_trials only when a loaded box hits the wall cap


def test_wrong_solution_is_incorrect(make_workspace, fast_config):
    wrong = RELU_KERNEL.replace("x[i] > 0.f ? x[i] : 0.f", "x[i] > 0.f ? 2.f * x[i] : 0.f")
    res = evaluate(make_workspace(kernels={"relu.cpp": wrong, "relu_binding.cpp": RELU_BINDING}), fast_config)
    assert res.reward == -1
    assert res.compiled and not res.correct
    assert res.reason.startswith("incorrect")
    assert "elements outside" in res.reason


def test_compile_error_reports_the_compiler_message(make_workspace, fast_config):
    broken = RELU_KERNEL.replace("y[i] =", "y[i] = undefined_name +")
    res = evaluate(make_workspace(kernels={"relu.cpp": broken, "relu_binding.cpp": RELU_BINDING}), fast_config)
    assert res.reward == -1 and not res.compiled
    assert res.reason.startswith("compile error")
    assert "undefined_name" in res.reason
    assert "kernels/relu.cpp" in res.reason
    assert str(res.build and "") == ""  # absolute paths are trimmed away
    assert "/tmp" not in res.reason.split("kernels/relu.cpp")[0]


SEGFAULT_KERNEL = '''
#include <cstdint>
extern "C" void relu_kernel(const float* x, float* y, int64_t n) {
  volatile float* p = nullptr;
  p[n] = 1.0f;
}
'''

HANG_KERNEL = '''
#include <cstdint>
extern "C" void relu_kernel(const float* x, float* y, int64_t n) {
  volatile int64_t i = 0;
  while (true) { i = i + 1; }
}
'''

GREEDY_MODEL_NEW = '''
import torch
import torch.nn as nn
import cpu_extension

class ModelNew(nn.Module):
    def forward(self, x):
        hoard = []
        while True:
            hoard.append(torch.ones(64, 1024, 1024))  # 256 MiB each, touched
'''


def test_crash_hang_and_oom_each_fail_and_the_next_evaluation_still_works(make_workspace, fast_config):
    crash = evaluate(make_workspace(kernels={"relu.cpp": SEGFAULT_KERNEL, "relu_binding.cpp": RELU_BINDING},
                                    name="segv"), fast_config)
    assert crash.reward == -1 and crash.compiled
    assert "segmentation fault" in crash.reason and "SIGSEGV" in crash.reason

    hang_cfg = fast_config.model_copy(update={"worker_timeout_s": 8})
    hang = evaluate(make_workspace(kernels={"relu.cpp": HANG_KERNEL, "relu_binding.cpp": RELU_BINDING},
                                   name="hang"), hang_cfg)
    assert hang.reward == -1 and "timed out" in hang.reason
    assert hang.seconds < 60

    oom = evaluate(make_workspace(model_new=GREEDY_MODEL_NEW, name="oom"), fast_config)
    assert oom.reward == -1
    assert "out of memory" in oom.reason.lower() or "can't allocate" in oom.reason.lower(), oom.reason

    after = evaluate(make_workspace(name="after"), fast_config)
    assert after.reward >= 1, after.reason


def test_tampering_with_a_fixed_file_is_caught(make_workspace, fast_config):
    ws = make_workspace()
    header = ws.root / "binding_registry.h"
    header.chmod(header.stat().st_mode | stat.S_IWUSR)
    header.write_text(header.read_text() + "\n#define TORCH_CHECK(...)\n")
    res = evaluate(ws, fast_config)
    assert res.reward == -1 and res.reason.startswith("tampered")
    assert "binding_registry.h" in res.reason


def test_code_nested_too_deeply_to_check_is_a_verdict_not_a_crash(make_workspace, fast_config):
    """Round 4: a 1,000-term sum in forward made the static checks raise RecursionError, and
    evaluate() raised instead of answering (a trainer calling it in-process lost the rollout)."""
    from tests.conftest import RELU_MODEL_NEW

    deep = RELU_MODEL_NEW.replace("    def forward(self, x):\n",
                                  "    def forward(self, x):\n        k = " + "+".join(["1"] * 1000) + "\n")
    assert deep != RELU_MODEL_NEW
    res = evaluate(make_workspace(model_new=deep, name="deep"), fast_config)
    assert res.reward == -1 and "nests too deeply" in res.reason, res.reason


def test_missing_model_new_class_is_a_load_failure(make_workspace, fast_config):
    res = evaluate(make_workspace(model_new="import cpu_extension\nclass Other: pass\n"), fast_config)
    assert res.reward == -1 and "ModelNew" in res.reason
    assert res.stage == "load" and res.load_step == "import"  # KernelBench: not compiled


def test_state_dict_must_match_the_reference(make_workspace, fast_config):
    task = '''
import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(n))
    def forward(self, x):
        return x * self.scale
def get_inputs():
    return [torch.randn(8, 16)]
def get_init_inputs():
    return [16]
'''
    model_new = RELU_MODEL_NEW.replace("class ModelNew(nn.Module):", "class ModelNew(nn.Module):\n"
                                       "    def __init__(self, n):\n        super().__init__()\n")
    res = evaluate(make_workspace(model_new=model_new, task_source=task, name="sd"), fast_config)
    assert res.reward == -1 and "scale" in res.reason  # missing key named
    assert res.stage == "load" and res.load_step == "construct"  # KernelBench: compiled, not correct


def test_verify_only_gives_reward_one_without_timing(make_workspace, fast_config):
    res = evaluate(make_workspace(), fast_config.model_copy(update={"measure": False}))
    assert res.reward == 1 and res.correct and res.time_ms.candidate is None


def test_modules_planted_in_the_working_directory_are_not_imported(make_workspace, fast_config, monkeypatch):
    """`python -m` puts the working directory first on sys.path: run from inside a workspace, the
    judge and the candidate (before its sandbox) would import a planted `torch`. They start in
    their scratch dir (the judge in /) instead."""
    from cuda_agent.evaluation.judge_client import drop_judge

    ws = make_workspace()
    (ws.root / "torch").mkdir()
    (ws.root / "torch" / "__init__.py").write_text("raise SystemExit('planted torch imported')\n")
    drop_judge("cpu")  # the next evaluation starts its judge (and candidates) from this directory
    monkeypatch.chdir(ws.root)
    res = evaluate(ws, fast_config.model_copy(update={"measure": False}))
    assert res.reward == 1 and res.correct, res.reason + res.worker_log
    drop_judge("cpu")


def test_unchanged_reference_is_not_called_faster(make_workspace, fast_config):
    """The candidate is the reference itself, with the guards (which forbid exactly that) off."""
    same = RELU_MODEL_NEW.replace("return cpu_extension.relu(x.contiguous())", "return torch.relu(x)")
    same = "import torch\n" + same
    cfg = fast_config.model_copy(update={"guards": GuardConfig.off()})
    for _ in range(3):
        res = evaluate(make_workspace(model_new=same, name="same"), cfg)
        assert res.reward == 1, res.reason


def test_compile_baseline_is_measured_then_cached(make_workspace, fast_config):
    cfg = fast_config.model_copy(update={"compile_mode": "default"})
    own = RELU_TASK + "\n# a task of its own: no other test's baseline is cached for it\n"
    first = evaluate(make_workspace(name="cached", task_source=own), cfg)
    assert first.reward >= 1, first.reason + first.worker_log
    assert first.time_ms.compile is not None and not first.baseline_cached
    second = evaluate(make_workspace(name="cached", task_source=own), cfg)
    assert second.baseline_cached and second.time_ms.compile is not None
    assert second.seconds < first.seconds


ROW_SUM_TASK = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.sum(x, dim=1)

def get_inputs():
    return [torch.randn(128, 110_000)]  # 56 MB a trial: five are more than the judge holds

def get_init_inputs():
    return []
'''

ROW_SUM_MODEL_NEW = '''
import torch.nn as nn
import cpu_extension

class ModelNew(nn.Module):
    def forward(self, x):
        return cpu_extension.row_sum(x.contiguous())
'''

ROW_SUM_BINDING = '''
#include "binding_registry.h"
at::Tensor row_sum_forward(const at::Tensor& x) {
  CHECK_CONTIGUOUS(x); CHECK_DTYPE(x, at::kFloat);
  auto y = at::empty({x.size(0)}, x.options());
  const float* p = x.data_ptr<float>(); float* q = y.data_ptr<float>();
  const int64_t cols = x.size(1);
  for (int64_t r = 0; r < x.size(0); ++r) {
    double acc = 0;
    for (int64_t c = 0; c < COLS; ++c) acc += p[r * cols + c];
    q[r] = (float)acc;
  }
  return y;
}
REGISTER_BINDING(row_sum, row_sum_forward)
'''


@pytest.mark.parametrize("cols,correct", [("cols", True), ("cols - 1", False)])
def test_trials_too_large_to_hold_are_checked_against_held_reference_outputs(make_workspace, fast_config, cols, correct):
    """Issue 23: where five trials are too large to hold but their outputs are small, the judge
    holds the reference outputs and makes only the inputs again at verification (and the
    secret trial's output in the reference phase), with no reference forward beside the clients.
    The honest row sum keeps its verdict; one that skips a column per row is still wrong."""
    ws = make_workspace(model_new=ROW_SUM_MODEL_NEW, kernels={"row_sum_binding.cpp": ROW_SUM_BINDING.replace("COLS", cols)},
                        task_source=ROW_SUM_TASK, name=f"row_sum_{correct}")
    res = evaluate(ws, fast_config.model_copy(update={"measure": False}))
    if correct:
        assert res.correct and res.reward >= 0, res.reason
        assert len(res.trials) == fast_config.trials + 1 and all(t.ok for t in res.trials)
    else:
        assert res.reward == -1 and "incorrect: trial 0" in res.reason, res.reason


RECYCLING_ROW_SUM_TASK = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.held = None
    def forward(self, x):
        if self.held is None:
            self.held = torch.empty(x.shape[0])
        return torch.sum(x, dim=1, out=self.held)  # one buffer, overwritten by every call

def get_inputs():
    return [torch.randn(128, COLS)]

def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("cols", [1000, 110_000])  # trials held; trials too large to hold
def test_a_reference_that_returns_one_buffer_for_every_call_is_verified_call_by_call(make_workspace, fast_config, cols):
    """Review of the held reference outputs: a reference whose every call overwrites one buffer
    gives trials whose outputs are all that buffer; held, every trial would be checked against the
    last call's output. Such trials are made again, forward and all, when used."""
    ws = make_workspace(model_new=ROW_SUM_MODEL_NEW, kernels={"row_sum_binding.cpp": ROW_SUM_BINDING.replace("COLS", "cols")},
                        task_source=RECYCLING_ROW_SUM_TASK.replace("COLS", str(cols)), name=f"recycling_{cols}")
    res = evaluate(ws, fast_config.model_copy(update={"measure": False}))
    assert res.correct and res.reward >= 0, res.reason
