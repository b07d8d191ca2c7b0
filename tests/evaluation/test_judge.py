"""The judge / candidate split, attacked as a hostile policy would on the CPU backend.

Threat model (docs/guards.md): once candidate code is loaded it owns its whole process. Each
test switches the static checks off, so what is tested is what holds *after* candidate code
runs: the judge's own clock, outputs read from outside the candidate and compared for every
call, the frozen candidate, the sandbox, the judge-owned baseline cache.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cuda_agent.evaluation import GuardConfig, evaluate

from tests.conftest import RELU_BINDING, RELU_KERNEL, RELU_MODEL_NEW, RELU_TASK

pytestmark = pytest.mark.slow


def _cfg(fast_config, **guards):
    return fast_config.model_copy(update={"guards": GuardConfig(static_checks=False, symbols=False, **guards)})


SLOW_HONEST_WITH_FORGED_CLAIMS = '''
import sys, time
import torch.nn as nn
import cpu_extension

harness = next(m for m in (sys.modules.get("cuda_agent.evaluation.candidate"), sys.modules["__main__"])
               if hasattr(m, "_Session"))          # forked from the fork server, or started as -m
real_send = harness._Session.send
def forged_send(self, msg):                    # every answer now also claims great numbers
    msg = dict(msg, samples={"candidate": [1e-6] * 100, "eager": [9.0] * 100}, time_ms=1e-6, reward=3,
               correct=True, speedup_vs_eager=100.0)
    real_send(self, msg)
harness._Session.send = forged_send

class ModelNew(nn.Module):
    def forward(self, x):
        time.sleep(0.003)
        return cpu_extension.relu(x.contiguous())
'''


def test_forged_claims_from_the_candidate_process_are_ignored(make_workspace, fast_config):
    res = evaluate(make_workspace(model_new=SLOW_HONEST_WITH_FORGED_CLAIMS, name="forged"), _cfg(fast_config))
    assert res.correct and res.reward == 1, res.reason
    assert res.time_ms.candidate >= 3.0 and res.speedup_vs_eager < 1


FORGED_READY = '''
import os, socket, json
import torch.nn as nn
import cpu_extension

for fd in map(int, os.listdir("/proc/self/fd")):   # find the channel and speak first
    try:
        s = socket.socket(fileno=os.dup(fd))
        if s.type == socket.SOCK_SEQPACKET:
            s.send(json.dumps({"type": "done", "outputs": []}).encode())
            s.send(json.dumps({"type": "result", "reward": 3, "correct": True}).encode())
    except OSError:
        pass

class ModelNew(nn.Module):
    def forward(self, x):
        return cpu_extension.relu(x.contiguous())
'''


def test_messages_out_of_turn_break_the_protocol(make_workspace, fast_config):
    res = evaluate(make_workspace(model_new=FORGED_READY, name="outofturn"), _cfg(fast_config))
    assert res.reward == -1 and "protocol" in res.reason, res.reason


GC_SNOOP = '''
import gc, sys
import torch
import torch.nn as nn
objects = gc.get_objects()
found = [type(o).__name__ for o in objects if isinstance(o, nn.Module)]          # a live model
found += [m for m in sys.modules if m in ("reference_task", "model", "__judge__")]    # the task's module
found += [getattr(o, "__name__", "?") for o in objects                             # its functions / classes
          if callable(o) and getattr(o, "__module__", None) in ("reference_task", "model")]
raise RuntimeError("FOUND:" + repr(found))
'''


def test_the_reference_is_not_in_the_candidates_process(make_workspace, fast_config):
    res = evaluate(make_workspace(model_new=GC_SNOOP, name="snoop"), _cfg(fast_config))
    assert res.reward == -1 and "FOUND:[]" in res.reason, res.reason


CHECK_DETECTOR = '''
import torch
import torch.nn as nn
import cpu_extension
from torch.utils._python_dispatch import _get_current_dispatch_mode

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.last = None

    def forward(self, x):
        self.calls += 1
        checked = _get_current_dispatch_mode() is not None or self.calls <= 6   # 5 seeded trials, 1 secret
        if checked or self.last is None or self.last.shape != x.shape:
            self.last = cpu_extension.relu(x.contiguous())
            return self.last
        return self.last                               # skip the work when nobody looks
'''


def test_skipping_work_on_calls_that_look_unchecked_is_caught(make_workspace, fast_config):
    res = evaluate(make_workspace(model_new=CHECK_DETECTOR, name="detect"), _cfg(fast_config))
    # the same tensor for every call of a batch is also a recycled output (issue 24): either catches it
    assert res.reward == -1 and ("while being timed" in res.reason or "recycled output" in res.reason), res.reason


DEFERRED_TO_STARTUP_THREAD = '''
import queue, threading, time
import torch
import torch.nn as nn
import cpu_extension

jobs = queue.Queue()
def worker():                                      # started at import, like a static initializer
    while True:
        x, out = jobs.get()
        time.sleep(0.002)
        out.copy_(cpu_extension.relu(x))
threading.Thread(target=worker, daemon=True).start()

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls <= 6:                        # the verification calls (5 seeded, 1 secret)
            return cpu_extension.relu(x.contiguous())
        out = torch.empty_like(x)
        jobs.put((x.contiguous(), out))            # return at once; the thread fills it later
        return out
'''


def test_work_deferred_to_a_thread_started_at_import_is_caught(make_workspace, fast_config):
    res = evaluate(make_workspace(model_new=DEFERRED_TO_STARTUP_THREAD, name="deferred"), _cfg(fast_config))
    assert res.reward == -1, res.reason
    assert "while being timed" in res.reason or "work outside its timed calls" in res.reason, res.reason


def _poisoner(cache: Path) -> str:
    return f'''
import json, os, glob
import torch.nn as nn
import cpu_extension
written = []
for path in glob.glob({str(cache)!r} + "/baselines/*.json") + [{str(cache)!r} + "/baselines/forged.json"]:
    try:
        with open(path, "w") as fh:
            json.dump({{"eager": {{"median": 1e9, "mean": 1e9, "std": 0, "min": 1e9, "max": 1e9, "trials": 9}},
                       "compile": {{"median": 1e9, "mean": 1e9, "std": 0, "min": 1e9, "max": 1e9, "trials": 9}}}}, fh)
        written.append(path)
    except OSError as exc:
        pass
if written:
    raise RuntimeError("POISONED:" + repr(written))

class ModelNew(nn.Module):
    def forward(self, x):
        return cpu_extension.relu(x.contiguous())
'''


def test_baseline_cache_cannot_be_poisoned(make_workspace, fast_config, cache_dir):
    cfg = _cfg(fast_config).model_copy(update={"compile_mode": "default"})
    honest = evaluate(make_workspace(name="honest_first"), cfg)  # writes the baseline for this task
    assert honest.correct, honest.reason
    before = {p: p.read_bytes() for p in (cache_dir / "baselines").glob("*.json")}
    assert before
    res = evaluate(make_workspace(model_new=_poisoner(cache_dir), name="poison"), cfg)
    assert "POISONED" not in res.reason, res.reason
    after = {p: p.read_bytes() for p in (cache_dir / "baselines").glob("*.json")}
    assert after == before
    again = evaluate(make_workspace(name="honest_again"), cfg)
    assert again.baseline_cached and again.reward == honest.reward == 1


WRITE_OUTSIDE = '''
import os
import torch.nn as nn
import cpu_extension
hits = []
for path in ("/dev/shm/cuda-agent-attack", "/tmp/cuda-agent-attack", os.path.expanduser("~/../cuda-agent-attack")):
    try:
        with open(path, "w") as fh:
            fh.write("x")
        hits.append(path)
    except OSError:
        pass
import socket
try:
    socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    hits.append("tcp socket")
except OSError:
    pass
try:
    os.fork()
    hits.append("fork")
except OSError:
    pass
raise RuntimeError("ESCAPED:" + repr(hits))
'''


def test_the_candidate_writes_nowhere_and_reaches_no_socket(make_workspace, fast_config):
    res = evaluate(make_workspace(model_new=WRITE_OUTSIDE, name="escape"), _cfg(fast_config))
    assert res.reward == -1 and "ESCAPED:[]" in res.reason, res.reason + json.dumps(res.sandbox)
    assert not os.path.exists("/dev/shm/cuda-agent-attack") and not os.path.exists("/tmp/cuda-agent-attack")


SOFTMAX_TASK = '''
import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
def get_inputs():
    return [torch.randn(16, 16384)]
def get_init_inputs():
    return []
'''

UNIFORM_BINDING = RELU_BINDING.replace("relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());",
                                       "relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), x.size(1));"
                                       ).replace("int64_t n);", "int64_t n, int64_t cols);")
UNIFORM_KERNEL = '''
#include <cstdint>
extern "C" void relu_kernel(const float* x, float* y, int64_t n, int64_t cols) {
  for (int64_t i = 0; i < n; ++i) y[i] = 1.0f / cols;   // "softmax": every value 1/N, always within 1e-2
}
'''


def test_a_wrong_formula_inside_the_absolute_tolerance_fails(make_workspace, fast_config):
    ws = make_workspace(task_source=SOFTMAX_TASK, name="uniform",
                        kernels={"relu.cpp": UNIFORM_KERNEL, "relu_binding.cpp": UNIFORM_BINDING})
    res = evaluate(ws, _cfg(fast_config))
    assert res.reward == -1 and "relative error" in res.reason, res.reason


def test_kernelbench_tolerance_profile_is_selectable(make_workspace, fast_config):
    res = evaluate(make_workspace(name="kbtol"), fast_config.model_copy(update={"tolerance": "kernelbench"}))
    assert res.correct, res.reason
    with pytest.raises(ValueError, match="tolerance profile"):
        fast_config.model_copy(update={"tolerance": "loose"}).model_validate({"tolerance": "loose"})


def test_baselines_are_measured_without_any_kernel(make_workspace, fast_config):
    from cuda_agent.evaluation import measure_baselines

    ws = make_workspace(model_new="raise SystemExit('no kernel yet')", name="starter")
    base = measure_baselines(ws, fast_config.model_copy(update={"use_baseline_cache": False}))
    assert base.eager.median > 0 and base.eager.trials >= 3


def test_a_hung_forward_names_the_stage_and_its_limit(make_workspace, fast_config):
    hang = RELU_MODEL_NEW.replace("return cpu_extension", "import time\n        while True: time.sleep(1)\n        return cpu_extension")
    from cuda_agent.evaluation.config import StageTimeouts

    cfg = _cfg(fast_config).model_copy(update={"timeouts": StageTimeouts(load_s=60, verify_s=3, time_s=60)})
    res = evaluate(make_workspace(model_new=hang, name="hang"), cfg)
    assert res.reward == -1 and res.stage == "verify", res.reason
    assert "timed out" in res.reason and "3 s" in res.reason and res.seconds < 60, res.reason


def test_the_judge_never_loads_candidate_code(make_workspace, fast_config):
    """The judge's process maps no candidate library (checked from /proc, outside it)."""
    from cuda_agent.evaluation.judge_client import get_judge
    from cuda_agent.isolation.sandbox import process_tree

    res = evaluate(make_workspace(name="nolib"), fast_config)
    assert res.correct, res.reason
    judge = get_judge("cpu")
    maps = Path(f"/proc/{judge.proc.pid}/maps").read_text()
    assert "cpu_extension" not in maps and "/lib/" in maps
    assert "model_new" not in Path(f"/proc/{judge.proc.pid}/cmdline").read_text()
    assert all(p != judge.proc.pid for p in process_tree(judge.proc.pid)[1:])



# ---- the red team's finds (this session), kept as regression tests ----------------------------
BIG_RELU_TASK = '''
import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)
def get_inputs():
    return [torch.randn(512, 4096)]
def get_init_inputs():
    return []
'''

CACHED_BY_ADDRESS = '''
import torch.nn as nn
import cpu_extension

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.memo = {}
        self.calls = 0

    def forward(self, x):
        self.calls = self.calls + 1
        k = x.data_ptr()                      # each input slot keeps its address round after round
        if self.calls > 6 and k in self.memo:     # after the verification calls (5 seeded, 1 secret)
            return self.memo[k]
        y = cpu_extension.relu(x.contiguous())
        if self.calls > 6:
            self.memo[k] = y
        return y
'''


def test_outputs_cached_by_slot_address_are_caught(make_workspace, fast_config):
    res = evaluate(make_workspace(model_new=CACHED_BY_ADDRESS, task_source=BIG_RELU_TASK, name="memo"),
                   fast_config)
    # the memo hands back an output of an earlier round: wrong values, or memory the judge still holds
    assert res.reward == -1 and ("while being timed" in res.reason or "recycled output" in res.reason), res.reason


INPLACE_BINDING = RELU_BINDING.replace("REGISTER_BINDING(relu, relu_forward)", """REGISTER_BINDING(relu, relu_forward)
at::Tensor relu_inplace(const at::Tensor& x) {
  CHECK_CONTIGUOUS(x); CHECK_DTYPE(x, at::kFloat);
  relu_kernel(x.data_ptr<float>(), x.data_ptr<float>(), x.numel());
  return x;
}
REGISTER_BINDING(relu_inplace, relu_inplace)""")

INPLACE_WHEN_TIMED = '''
import torch.nn as nn
import cpu_extension

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls = self.calls + 1
        if self.calls > 6:                         # after the verification calls (5 seeded, 1 secret)
            return cpu_extension.relu_inplace(x)   # no output allocation: what eager pays, saved
        return cpu_extension.relu(x.contiguous())
'''


def test_input_mutation_while_timed_is_caught(make_workspace, fast_config):
    ws = make_workspace(model_new=INPLACE_WHEN_TIMED, task_source=BIG_RELU_TASK, name="inplace",
                        kernels={"relu.cpp": RELU_KERNEL, "relu_binding.cpp": INPLACE_BINDING})
    res = evaluate(ws, fast_config)
    # the output is the input slot itself: an output aliasing an input (issue 24) or the mutation
    assert res.reward == -1 and ("input mutation while being timed" in res.reason
                                 or "aliases an input" in res.reason), res.reason


NOT_REPRODUCIBLE_TASK = RELU_TASK.replace("return torch.relu(x)", "return torch.relu(x) + torch.rand(1)")


def test_a_baseline_client_that_disagrees_with_the_reference_is_the_judges_fault(make_workspace, fast_config):
    """Every timed candidate output is compared with the baseline client's: a client whose
    eager output is not the judge's reference (here the task itself is not reproducible; on a
    GPU, weights read before the judge's copy landed) stops the evaluation as an
    infrastructure fault, never as the candidate's wrong output."""
    res = evaluate(make_workspace(task_source=NOT_REPRODUCIBLE_TASK, name="unreproducible"), _cfg(fast_config))
    assert res.reward == -1 and "infrastructure" in res.reason, res.reason
    assert "baseline client's eager output differs from the judge's reference" in res.reason, res.reason


def test_threads_share_one_judge_and_take_turns(make_workspace, fast_config):
    """Build workers and services call evaluate from threads: one judge per backend per process
    (a second one started by a racing thread was never closed and kept its device memory), and
    answers reach the thread that asked."""
    import threading

    from cuda_agent.evaluation import judge_client

    workspaces = [make_workspace(name=f"t{i}") for i in range(2)]
    results: dict[int, object] = {}
    seen: set[int] = set()

    def one(i: int) -> None:
        seen.add(id(judge_client.get_judge("cpu")))
        results[i] = evaluate(workspaces[i], fast_config)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 1
    assert all(results[i].task == f"t{i}" and results[i].reward >= 1 for i in range(2)), \
        [(r.task, r.reward, r.reason) for r in results.values()]
