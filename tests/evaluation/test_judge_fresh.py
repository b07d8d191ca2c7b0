"""Issue 24, classes 1, 2 and 5, attacked as a hostile policy would on the CPU backend.

1. inputs that repeat: integer / bool inputs (indices, ids, masks) and the verification sets
   must be new and unpredictable on every call, and still valid for the task;
2. outputs that are recycled: an output is fresh memory, aliasing no input, no other output
   and no earlier output the judge still holds;
5. the judge's own resources: an output's layout is checked against the reference's before
   one byte of it is read.

Each hostile case passed (reward >= 1) before the fix; the honest neighbours keep their reward.
"""

from __future__ import annotations

import pytest

from cuda_agent.evaluation import GuardConfig, evaluate

from tests.conftest import RELU_KERNEL

pytestmark = pytest.mark.slow


def _cfg(fast_config, **update):
    return fast_config.model_copy(update={"guards": GuardConfig(static_checks=False, symbols=False), **update})


def _torch_ok(fast_config):
    """Torch ops in forward allowed: what is tested is the layout / the inputs, not the kernel."""
    return fast_config.model_copy(update={"guards": GuardConfig(static_checks=False, symbols=False,
                                                                torch_compute=False)})


# ---- class 1: inputs that repeat --------------------------------------------------------------
GATHER_TASK = '''
import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.randn(4096, 64))
    def forward(self, idx):
        return self.table[idx]
def get_inputs():
    return [torch.randint(0, 4096, (2048,))]
def get_init_inputs():
    return []
'''

# the same task with ids drawn by Python's own generator (not torch's)
GATHER_TASK_PYRANDOM = GATHER_TASK.replace(
    "import torch\n", "import random\nimport torch\n", 1).replace(
    "return [torch.randint(0, 4096, (2048,))]", "return [torch.tensor([random.randrange(4096) for _ in range(2048)])]")

GATHER_KERNEL = '''
#include <cstdint>
extern "C" void gather_rows(const float* table, const int64_t* idx, float* out, int64_t n, int64_t d) {
  #pragma omp parallel for
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < d; ++j) out[i * d + j] = table[idx[i] * d + j];
}
'''

GATHER_BINDING = '''
#include "binding_registry.h"
extern "C" void gather_rows(const float* table, const int64_t* idx, float* out, int64_t n, int64_t d);
at::Tensor gather_forward(const at::Tensor& table, const at::Tensor& idx) {
  auto out = at::empty({idx.size(0), table.size(1)}, table.options());
  gather_rows(table.data_ptr<float>(), idx.data_ptr<int64_t>(), out.data_ptr<float>(), idx.size(0), table.size(1));
  return out;
}
REGISTER_BINDING(gather, gather_forward)
'''

GATHER_KERNELS = {"gather.cpp": GATHER_KERNEL, "gather_binding.cpp": GATHER_BINDING}

HONEST_GATHER = '''
import torch.nn as nn
import cpu_extension
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("table", __import__("torch").empty(4096, 64))
    def forward(self, idx):
        return cpu_extension.gather(self.table, idx.contiguous())
'''

# honest on the first `HONEST_CALLS` calls, remembering each output by a hash of the ids; then it
# bets that ids repeat and answers from memory (zeros when they do not)
MEMO_BY_IDS = '''
import hashlib
import torch
import torch.nn as nn
import cpu_extension
HONEST_CALLS = {honest}
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.empty(4096, 64))
        self.memo, self.calls = {{}}, 0
    def forward(self, idx):
        self.calls += 1
        key = hashlib.sha1(idx.contiguous().numpy().tobytes()).hexdigest()
        if self.calls <= HONEST_CALLS:
            self.memo[key] = cpu_extension.gather(self.table, idx.contiguous())
        hit = self.memo.get(key)
        return hit.clone() if hit is not None else torch.zeros(idx.shape[0], 64)
'''


@pytest.mark.parametrize("task", [GATHER_TASK, GATHER_TASK_PYRANDOM], ids=["torch-ids", "python-random-ids"])
def test_integer_inputs_are_new_on_every_timed_call(make_workspace, fast_config, task):
    """Five verification calls plus the secret one computed, then answers from memory: before the
    fix the timed rounds cycled through the five verification id sets, so every call hit."""
    ws = make_workspace(model_new=MEMO_BY_IDS.format(honest=6), task_source=task, name="memo_ids",
                        kernels=GATHER_KERNELS)
    res = evaluate(ws, _cfg(fast_config))
    assert res.reward == -1 and "while being timed" in res.reason, res.reason


def test_verification_includes_a_set_nobody_can_predict(make_workspace, fast_config):
    """The five trial seeds follow from the configured seed; a policy that knows them (or learned
    their outputs) passed a correctness-only evaluation with a kernel that outputs zeros."""
    ws = make_workspace(model_new=MEMO_BY_IDS.format(honest=5), task_source=GATHER_TASK, name="memo_seeds",
                        kernels=GATHER_KERNELS)
    res = evaluate(ws, _cfg(fast_config, measure=False))
    assert res.reward == -1 and res.stage == "verify" and "secret" in res.reason, res.reason


def test_an_honest_gather_keeps_its_reward(make_workspace, fast_config):
    ws = make_workspace(model_new=HONEST_GATHER, task_source=GATHER_TASK, name="gather", kernels=GATHER_KERNELS)
    res = evaluate(ws, _cfg(fast_config))
    assert res.correct and res.reward >= 1 and not res.flags, res.reason
    assert len(res.trials) == 6 and all(t.ok for t in res.trials)


MASK_TASK = '''
import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x, mask, offsets):
        # valid only while the mask is bool and the offsets are sorted and in range
        assert mask.dtype == torch.bool and bool((offsets[1:] >= offsets[:-1]).all()) and int(offsets[-1]) <= x.shape[0]
        return torch.where(mask, x, 0.0).cumsum(0)[offsets - 1]
def get_inputs():
    n = 4096
    return [torch.randn(n), torch.rand(n) > 0.5, torch.sort(torch.randint(1, n + 1, (64,))).values]
def get_init_inputs():
    return []
'''


def test_fresh_inputs_stay_valid_for_the_task(make_workspace, fast_config):
    """Masks stay bool, sorted offsets stay sorted and in range: the task's own generator draws
    them (the reference asserts it on every call, eager in the baseline client included)."""
    torch_model = '''
import torch
import torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, x, mask, offsets):
        assert mask.dtype == torch.bool and bool((offsets[1:] >= offsets[:-1]).all())
        return torch.where(mask, x, 0.0).cumsum(0)[offsets - 1]
'''
    ws = make_workspace(model_new=torch_model, task_source=MASK_TASK, name="mask")
    res = evaluate(ws, _torch_ok(fast_config))
    assert res.correct and res.reward >= 1, res.reason


# ---- class 2: outputs that are recycled ---------------------------------------------------------
RELU_TASK_BIG = '''
import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)
def get_inputs():
    return [torch.randn(256, 1024)]
def get_init_inputs():
    return []
'''

INTO_BINDING = '''
#include "binding_registry.h"
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
at::Tensor relu_into(const at::Tensor& x, at::Tensor out) {
  relu_kernel(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());
  return out;
}
REGISTER_BINDING(relu_into, relu_into)
'''

INTO_KERNELS = {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": INTO_BINDING}

# {key}: which buffer a call writes into and returns, overwriting what it returned before
RECYCLER = '''
import torch
import torch.nn as nn
import cpu_extension
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.buffers, self.calls = {{}}, 0
    def forward(self, x):
        self.calls += 1
        key = {key}
        out = self.buffers.get(key)
        if out is None:
            out = self.buffers[key] = torch.empty_like(x)
        return cpu_extension.relu_into(x, out)
'''


@pytest.mark.parametrize("key, what", [
    ("x.data_ptr()", "one buffer per input slot, reused every round"),
    ("(x.data_ptr(), self.calls // {m} % 2)", "two generations per slot, alternating"),
], ids=["per-slot", "two-generations"])
def test_recycled_outputs_are_refused(make_workspace, fast_config, key, what):
    m = 4  # calls per timed interval, as the judge will choose for this task (asserted below)
    ws = make_workspace(model_new=RECYCLER.format(key=key.format(m=m)), task_source=RELU_TASK_BIG,
                        name="recycle", kernels=INTO_KERNELS)
    cfg = _cfg(fast_config)
    cfg = cfg.model_copy(update={"timing": cfg.timing.model_copy(update={"max_batch": m})})
    res = evaluate(ws, cfg)
    assert res.reward == -1 and "recycled" in res.reason, (what, res.reason)


IDENTITY_TASK = '''
import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return x.clone()
def get_inputs():
    return [torch.randn(256, 1024)]
def get_init_inputs():
    return []
'''


def test_an_output_that_is_an_input_is_refused(make_workspace, fast_config):
    model = '''
import torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, x):
        return x                      # the input slot itself: the copy eager pays for, skipped
'''
    res = evaluate(make_workspace(model_new=model, task_source=IDENTITY_TASK, name="alias_in"),
                   _cfg(fast_config))
    assert res.reward == -1 and "aliases an input" in res.reason, res.reason


def test_an_output_that_is_a_view_of_an_input_is_fine_where_the_reference_returns_one(make_workspace, fast_config):
    task = IDENTITY_TASK.replace("return x.clone()", "return x.view(-1)")
    model = '''
import torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, x):
        return x.view(-1)
'''
    res = evaluate(make_workspace(model_new=model, task_source=task, name="view_in"), _cfg(fast_config))
    assert res.correct and res.reward >= 1, res.reason


TWO_OUTPUT_TASK = '''
import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x), torch.relu(x)
def get_inputs():
    return [torch.randn(256, 1024)]
def get_init_inputs():
    return []
'''


def test_one_buffer_returned_as_two_outputs_is_refused(make_workspace, fast_config):
    model = '''
import torch
import torch.nn as nn
import cpu_extension
class ModelNew(nn.Module):
    def forward(self, x):
        y = cpu_extension.relu_into(x, torch.empty_like(x))
        return y, y                   # the reference's two outputs are two allocations
'''
    res = evaluate(make_workspace(model_new=model, task_source=TWO_OUTPUT_TASK, name="alias_out",
                                  kernels=INTO_KERNELS), _cfg(fast_config))
    assert res.reward == -1 and "recycled" in res.reason, res.reason


def test_two_outputs_carved_from_one_allocation_are_fine(make_workspace, fast_config):
    model = '''
import torch
import torch.nn as nn
import cpu_extension
class ModelNew(nn.Module):
    def forward(self, x):
        both = torch.empty(2, *x.shape)
        cpu_extension.relu_into(x, both[0])
        cpu_extension.relu_into(x, both[1])
        return both[0], both[1]       # disjoint halves of one block: no aliasing
'''
    res = evaluate(make_workspace(model_new=model, task_source=TWO_OUTPUT_TASK, name="carved",
                                  kernels=INTO_KERNELS), _cfg(fast_config))
    assert res.correct and res.reward >= 1, res.reason


# ---- class 5: the judge's own resources --------------------------------------------------------
def test_an_output_with_a_huge_stride_is_refused_before_it_is_read(make_workspace, fast_config):
    """A correct output whose rows lie 16 rows apart: the judge copied its whole extent (16 MiB
    for 1 MiB of elements, per call) out of the candidate before any shape check."""
    model = '''
import torch
import torch.nn as nn
import cpu_extension
class ModelNew(nn.Module):
    def forward(self, x):
        rows, cols = x.shape
        big = torch.empty(rows * 16, cols)           # virtual memory: untouched pages cost nothing here
        return torch.clamp(x, min=0, out=big[::16])
'''
    res = evaluate(make_workspace(model_new=model, task_source=RELU_TASK_BIG, name="stride"), _torch_ok(fast_config))
    assert res.reward == -1 and "stride" in res.reason and "before" in res.reason, res.reason


def test_a_transposed_or_padded_output_is_fine(make_workspace, fast_config):
    model = '''
import torch
import torch.nn as nn
import cpu_extension
class ModelNew(nn.Module):
    def forward(self, x):
        rows, cols = x.shape
        padded = torch.empty(rows, cols + 16)       # rows padded to a cache line: honest
        return torch.clamp(x, min=0, out=padded[:, :cols])
'''
    res = evaluate(make_workspace(model_new=model, task_source=RELU_TASK_BIG, name="padded"), _torch_ok(fast_config))
    assert res.correct and res.reward >= 1, res.reason


# ---- issue 24, round 3: what the red team after classes 1, 2 and 5 got through ------------------
ROWMEAN_TASK = '''
import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return torch.mean(x, dim=1)
def get_inputs():
    return [torch.rand(64, 1 << 17)]
def get_init_inputs():
    return []
'''

ROWMEAN_KERNEL = '''
#include <cstdint>
extern "C" void rowmean_kernel(const float* x, float* y, int64_t rows, int64_t cols, int64_t frac) {
  int64_t used = cols / frac;
  #pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r) {
    const float* p = x + r * cols;
    double s = 0.0;
    for (int64_t i = 0; i < used; ++i) s += p[i];
    y[r] = (float)(s / (double)used);
  }
}
'''

ROWMEAN_BINDING = '''
#include "binding_registry.h"
extern "C" void rowmean_kernel(const float* x, float* y, int64_t rows, int64_t cols, int64_t frac);
at::Tensor rowmean_forward(const at::Tensor& x) {
  auto y = at::empty({x.size(0)}, x.options());
  rowmean_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.size(0), x.size(1), FRAC);
  return y;
}
REGISTER_BINDING(rowmean, rowmean_forward)
'''

ROWMEAN_MODEL_NEW = '''
import torch.nn as nn
import cpu_extension
class ModelNew(nn.Module):
    def forward(self, x):
        return cpu_extension.rowmean(x.contiguous())
'''


@pytest.mark.parametrize("frac", [8, 1], ids=["first-eighth", "honest"])
def test_a_kernel_that_reads_a_prefix_of_each_row_is_caught(make_workspace, fast_config, frac):
    """Round 3, a1 / a8: a row mean from the first 1/8 of each row was right within the tolerance
    on inputs scaled i.i.d. per element (reward 1 here, 2 at 19.8x with a costlier op). Inputs
    scaled by region (the secret trial and every timed round) make the prefix miss; the same
    kernel reading whole rows keeps its reward."""
    kernels = {"rowmean.cpp": ROWMEAN_KERNEL, "rowmean_binding.cpp": ROWMEAN_BINDING.replace("FRAC", str(frac))}
    ws = make_workspace(model_new=ROWMEAN_MODEL_NEW, task_source=ROWMEAN_TASK, name=f"rowmean{frac}", kernels=kernels)
    res = evaluate(ws, _cfg(fast_config))
    if frac == 1:
        assert res.correct and res.reward >= 1, res.reason
    else:
        assert res.reward == -1 and ("secret" in res.reason or "while being timed" in res.reason), res.reason


ROWMEAN_ADAPTIVE_BINDING = '''
#include "binding_registry.h"
extern "C" void rowmean_kernel(const float* x, float* y, int64_t rows, int64_t cols, int64_t frac);
static int64_t calls = 0;
at::Tensor rowmean_forward(const at::Tensor& x) {
  auto y = at::empty({x.size(0)}, x.options());
  // whole rows while the judge verifies (single calls), then a prefix of each row
  rowmean_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.size(0), x.size(1), ++calls <= 16 ? 1 : 8);
  return y;
}
REGISTER_BINDING(rowmean, rowmean_forward)
'''


def test_a_kernel_that_reads_a_prefix_only_once_verification_is_over_is_caught(make_workspace, fast_config):
    """Round 3, the adaptive a8: exact on every verification call (the secret trial included), a
    prefix of each row afterwards. Timed rounds scaled i.i.d. let it through (reward 1 at 1.31x);
    every round is scaled by region, as the secret trial is (hidden check rounds among i.i.d.
    ones were told apart by their statistics: round 4), so the prefix is wrong while timed."""
    kernels = {"rowmean.cpp": ROWMEAN_KERNEL, "rowmean_binding.cpp": ROWMEAN_ADAPTIVE_BINDING}
    ws = make_workspace(model_new=ROWMEAN_MODEL_NEW, task_source=ROWMEAN_TASK, name="rowmean-adaptive", kernels=kernels)
    res = evaluate(ws, _cfg(fast_config))
    assert res.reward == -1 and "while being timed" in res.reason, res.reason


# records what the five verification calls saw and fails on any later call that sees it again
REPLAY_WATCH = '''
import hashlib
import torch.nn as nn
import cpu_extension
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.seen, self.calls = set(), 0
    def forward(self, x):
        self.calls += 1
        key = hashlib.sha1(x.contiguous().numpy().tobytes()).hexdigest()
        if self.calls <= 5:
            self.seen.add(key)
        elif key in self.seen:
            raise RuntimeError(f"call {self.calls} replays a verification set")
        return cpu_extension.relu(x.contiguous())
'''


def test_no_batch_after_verification_replays_a_verification_set(make_workspace, fast_config):
    """Round 3, a10c: the two warm-up batches before the timed rounds ran on the unscaled input
    stack, which holds the verification sets; every batch the candidate runs after verification
    gets values no verification call saw."""
    res = evaluate(make_workspace(model_new=REPLAY_WATCH, name="replay"), _cfg(fast_config))
    assert res.correct and res.reward >= 1, res.reason


RELU_TASK_HUGE = RELU_TASK_BIG.replace("torch.randn(256, 1024)", "torch.randn(1152, 65536)")  # 288 MiB out

STATIC_BINDING = '''
#include "binding_registry.h"
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
at::Tensor relu_forward(const at::Tensor& x) {
  static at::Tensor pool;
  if (!pool.defined() || pool.numel() != x.numel()) pool = at::empty_like(x);
  relu_kernel(x.data_ptr<float>(), pool.data_ptr<float>(), x.numel());
  return pool;
}
REGISTER_BINDING(relu, relu_forward)
'''


@pytest.mark.parametrize("binding", ["static", "honest"])
def test_a_recycled_output_over_256_mib_is_refused(make_workspace, fast_config, binding):
    """Round 3, a4: over 256 MiB of outputs per batch no earlier batch was held, so one static
    output buffer went unseen (0.94x -> 3.86x on the CPU). Now a client holds at least the last
    batch while a share of its memory allows (here 3 GiB / 4 for two models of 288 MiB), and the
    second call already finds the buffer still held; `torch.empty` every call passes."""
    from tests.conftest import RELU_BINDING

    kernels = {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": STATIC_BINDING if binding == "static" else RELU_BINDING}
    ws = make_workspace(task_source=RELU_TASK_HUGE, name=f"huge_{binding}", kernels=kernels)
    res = evaluate(ws, _cfg(fast_config, measure=False, trials=2))  # three calls (one secret): the second decides
    if binding == "honest":
        assert res.correct and res.reward >= 1, res.reason
    else:
        assert res.reward == -1 and "recycled" in res.reason and "earlier batch" in res.reason, res.reason


IMPORT_TIME_TASK = '''
import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x, y):
        return torch.bmm(x, x.transpose(1, 2)) + y
x = torch.randn(8, 64, 64)   # drawn once, at import (hundreds of Ops-6K tasks do this)
y = torch.randn(8, 64, 64)
def get_inputs():
    return [x, y]
def get_init_inputs():
    return []
'''


def test_inputs_made_at_import_are_made_new_by_running_the_source_again(make_workspace, fast_config):
    """Ops-6K (e.g. rows 30 and 32) makes its inputs at module level: the same under every seed, so
    they were refused as 'a generator of its own'. The judge runs the task's source again for each
    draw (`_ImportedAgain`), and an honest candidate gets its reward; a constant made at import
    (an arange of many values) still moves under nothing, and is still refused."""
    model = '''
import torch
import torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, x, y):
        return torch.bmm(x, x.transpose(1, 2)) + y
'''
    res = evaluate(make_workspace(model_new=model, task_source=IMPORT_TIME_TASK, name="import_time"),
                   _torch_ok(fast_config))
    assert res.correct and res.reward >= 1, res.reason
    constant = IMPORT_TIME_TASK.replace("x = torch.randn(8, 64, 64)", "x = torch.arange(8 * 64 * 64.0).reshape(8, 64, 64)")
    constant = constant.replace("y = torch.randn(8, 64, 64)", "y = torch.arange(8 * 64 * 64.0).reshape(8, 64, 64)")
    res = evaluate(make_workspace(model_new=model, task_source=constant, name="import_constant"),
                   _torch_ok(fast_config))
    assert res.reward <= 0 and "same values under every seed" in res.reason, res.reason


IMPORT_MASK_TASK = '''
import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x, mask):
        return (x * mask).sum(1)
mask = torch.rand(256, 512) < 0.01   # drawn once, at import: two values, so structure by count alone
def get_inputs():
    return [torch.randn(256, 512), mask]
def get_init_inputs():
    return []
'''


def test_a_random_mask_made_at_import_is_drawn_anew(make_workspace, fast_config):
    """Red team round 18 (h1): a random mask made at import, beside an input drawn per call, passed
    the check as structure (two values), and a kernel that listed its nonzeros once and then read
    only those scored 3 to the honest kernel's 2. The module holds tensors and something stayed
    fixed, so the source runs again for each draw: the mask is new on every call, and a candidate
    that remembers it is wrong; the honest candidate keeps its reward."""
    remembers = '''
import torch
import torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, x, mask):
        if not hasattr(self, "where"):
            self.where = mask.nonzero(as_tuple=True)
        rows, cols = self.where
        return torch.zeros(x.shape[0], dtype=x.dtype, device=x.device).index_add_(0, rows, x[rows, cols])
'''
    honest = '''
import torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, x, mask):
        return (x * mask).sum(1)
'''
    res = evaluate(make_workspace(model_new=remembers, task_source=IMPORT_MASK_TASK, name="import_mask"),
                   _torch_ok(fast_config))
    assert res.reward == -1 and not res.correct, res.reason
    res = evaluate(make_workspace(model_new=honest, task_source=IMPORT_MASK_TASK, name="import_mask_honest"),
                   _torch_ok(fast_config))
    assert res.correct and res.reward >= 1, res.reason


DISTANCE_TASK = '''
import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, scores, distance):
        return (scores - 0.25 * distance).softmax(-1)
def get_inputs():
    n = torch.arange(256, dtype=torch.float32)
    return [torch.randn(4, 256, 256), (n[:, None] - n[None]).abs()]
def get_init_inputs():
    return []
'''


def test_a_task_that_declares_an_input_fixed_lets_a_kernel_assume_it(make_workspace, fast_config):
    """Red team round 20: ALiBi's distances |i - j| are many values in rows that are not sorted, so the
    shape rules refuse the task as data that never moves. Declared (`FIXED_INPUTS = [1]`), the input is
    the task's like a weight, handed to every call unscaled: a kernel that builds the distances itself
    instead of reading them is right on every trial, the secret one included."""
    assumes = '''
import torch
import torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, scores, distance):
        n = torch.arange(scores.shape[-1], dtype=scores.dtype, device=scores.device)
        return (scores - 0.25 * (n[:, None] - n[None]).abs()).softmax(-1)
'''
    res = evaluate(make_workspace(model_new=assumes, task_source=DISTANCE_TASK, name="distance_undeclared"),
                   _torch_ok(fast_config))
    assert res.reward <= 0 and "FIXED_INPUTS = [1]" in res.reason, res.reason
    declared = DISTANCE_TASK + "FIXED_INPUTS = [1]\n"
    res = evaluate(make_workspace(model_new=assumes, task_source=declared, name="distance_declared"),
                   _torch_ok(fast_config))
    assert res.correct and res.reward >= 1, res.reason
