"""Anti-hacking guards on the CPU backend: each hack gets -1 with a reason that names it,
and honest solutions (the bundled examples) keep their reward."""

from __future__ import annotations

import socket

import pytest

from cuda_agent.evaluation import EvalConfig, GuardConfig, evaluate
from cuda_agent.isolation.sandbox import namespaces_available as network_namespace_available
from cuda_agent.examples import list_examples
from cuda_agent.workspace import create_workspace

from tests.conftest import RELU_BINDING, RELU_KERNEL, RELU_MODEL_NEW

pytestmark = pytest.mark.slow


def _no_static(cfg: EvalConfig) -> EvalConfig:
    """Let the source through so the runtime guard is what must catch it."""
    return cfg.model_copy(update={"guards": GuardConfig(static_checks=False, symbols=False)})


def test_static_check_rejects_torch_fallback_before_building(make_workspace, fast_config):
    fallback = "import torch\n" + RELU_MODEL_NEW.replace("cpu_extension.relu(x.contiguous())", "torch.relu(x)")
    res = evaluate(make_workspace(model_new=fallback), fast_config)
    assert res.reward == -1 and res.stage == "guard" and not res.compiled
    assert "[torch-compute]" in res.reason and "model_new.py:" in res.reason
    assert res.findings and res.findings[0]["rule"] == "torch-compute"


def test_static_check_rejects_aten_compute_in_a_binding(make_workspace, fast_config):
    binding = RELU_BINDING.replace("auto y = at::empty_like(x);", "auto y = at::relu(x);")
    res = evaluate(make_workspace(kernels={"relu.cpp": RELU_KERNEL, "relu_binding.cpp": binding}), fast_config)
    assert res.reward == -1 and "aten-compute-in-cpp" in res.reason and "relu_binding.cpp" in res.reason


F_BOUND_EARLY = '''
import torch.nn as nn
import cpu_extension
from torch.nn.functional import relu as _fast_relu

class ModelNew(nn.Module):
    def forward(self, x):
        return _fast_relu(x)
'''

SWALLOWED = '''
import torch
import torch.nn as nn
import cpu_extension

class ModelNew(nn.Module):
    def forward(self, x):
        try:
            return torch.relu(x)
        except Exception:
            return cpu_extension.relu(x.contiguous())
'''


@pytest.mark.parametrize("source,op", [(F_BOUND_EARLY, "aten.relu"), (SWALLOWED, "aten.relu")])
def test_runtime_guard_blocks_torch_compute_however_spelled(make_workspace, fast_config, source, op):
    res = evaluate(make_workspace(model_new=source, name="rt"), _no_static(fast_config))
    assert res.reward == -1 and res.stage == "guard", res.reason
    assert op in res.reason and "torch compute at runtime" in res.reason


def test_runtime_guard_blocks_aten_calls_from_cpp(make_workspace, fast_config):
    binding = RELU_BINDING.replace('#include "binding_registry.h"', '#include "binding_registry.h"\n'
                                   '#include <ATen/ops/relu.h>').replace(
        "relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());\n  return y;", "return at::relu(x);")
    cfg = _no_static(fast_config)
    res = evaluate(make_workspace(kernels={"relu.cpp": RELU_KERNEL, "relu_binding.cpp": binding}, name="cpp"), cfg)
    assert res.reward == -1 and "aten.relu" in res.reason, res.reason


MUTATING_KERNEL = '''
#include <cstdint>
extern "C" void relu_kernel(const float* x, float* y, int64_t n) {
  float* xm = const_cast<float*>(x);
  for (int64_t i = 0; i < n; ++i) { y[i] = x[i] > 0.f ? x[i] : 0.f; xm[i] = 0.f; }
}
'''


def test_input_mutation_is_caught(make_workspace, fast_config):
    res = evaluate(make_workspace(kernels={"relu.cpp": MUTATING_KERNEL, "relu_binding.cpp": RELU_BINDING},
                                  name="mut"), fast_config)
    assert res.reward == -1 and "input mutation" in res.reason and "argument 0" in res.reason


TINY_TASK = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 1e-4

def get_inputs():
    return [torch.randn(64, 1024)]

def get_init_inputs():
    return []
'''

ZEROS_BINDING = RELU_BINDING.replace(
    "auto y = at::empty_like(x);\n  relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());",
    "auto y = at::zeros_like(x);")


def test_constant_output_passing_the_tolerance_is_caught(make_workspace, fast_config):
    res = evaluate(make_workspace(kernels={"relu.cpp": RELU_KERNEL, "relu_binding.cpp": ZEROS_BINDING},
                                  task_source=TINY_TASK, name="zeros"), fast_config)
    # two layers close this hole now: the scale-aware tolerance (zeros are 100% off next to the
    # output's own size) and, behind it, the constant-output check
    assert res.reward == -1 and ("constant output" in res.reason or "relative error" in res.reason), res.reason
    off = fast_config.model_copy(update={"guards": GuardConfig(constant_output=False)})
    alone = evaluate(make_workspace(kernels={"relu.cpp": RELU_KERNEL, "relu_binding.cpp": ZEROS_BINDING},
                                    task_source=TINY_TASK, name="zeros2"), off)
    assert alone.reward == -1 and "relative error" in alone.reason, alone.reason


def test_every_bundled_cpu_solution_passes_all_guards(tmp_path, fast_config):
    cfg = fast_config.model_copy(update={"measure": False})
    for ex in list_examples():
        ws = create_workspace(ex.task, tmp_path / ex.name, "cpu", cache_dir=tmp_path / "c")
        ex.install_solution(ws.root, "cpu")
        res = evaluate(ws, cfg)
        assert res.reward == 1, f"{ex.name}: {res.reason}"


CACHING = '''
import torch.nn as nn
import cpu_extension

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.seen = {}
    def forward(self, x):
        key = x.data_ptr()
        if key not in self.seen:
            self.seen[key] = cpu_extension.relu(x.contiguous())
        return self.seen[key]
'''


def test_output_caching_by_pointer_does_not_pay(make_workspace, fast_config):
    # Caught when a stale result meets a check round; otherwise it never hit: either way no gain.
    res = evaluate(make_workspace(model_new=CACHING, name="cache"), _no_static(fast_config))
    assert res.reward <= 1 and not res.faster_than_eager, res.reason
    if res.reward == -1:
        assert "incorrect" in res.reason or "while being timed" in res.reason or "recycled output" in res.reason


UNWRITTEN_BINDING = RELU_BINDING.replace(
    "relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());", "")


def test_output_never_written_is_incorrect(make_workspace, fast_config):
    res = evaluate(make_workspace(kernels={"relu.cpp": RELU_KERNEL, "relu_binding.cpp": UNWRITTEN_BINDING},
                                  name="unwritten"), fast_config)
    assert res.reward == -1 and res.reason.startswith("incorrect"), res.reason


PHONE_HOME = '''
import socket
import torch.nn as nn
import cpu_extension

class ModelNew(nn.Module):
    def forward(self, x):
        socket.create_connection(("127.0.0.1", PORT), timeout=2).close()
        return cpu_extension.relu(x.contiguous())
'''


@pytest.mark.skipif(not network_namespace_available(), reason="this OS refuses new network namespaces")
def test_worker_has_no_network(make_workspace, fast_config):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    port = server.getsockname()[1]
    source = PHONE_HOME.replace("PORT", str(port))
    cfg = fast_config.model_copy(update={"measure": False, "guards": GuardConfig(static_checks=False)})
    isolated = evaluate(make_workspace(model_new=source, name="net"), cfg)
    # refused first by the syscall filter (no socket() at all), else by Landlock's TCP rule or the
    # empty network namespace
    reason = isolated.reason.lower()
    assert isolated.reward == -1 and any(w in reason for w in ("unreachable", "permission denied",
                                                                "operation not permitted")), isolated.reason
    open_cfg = cfg.model_copy(update={"guards": GuardConfig(static_checks=False, no_network=False, filesystem=False,
                                                            syscalls=False)})
    assert evaluate(make_workspace(model_new=source, name="net2"), open_cfg).reward == 1  # the hole, shown
    server.close()


_MEMFD_AFTER_VERIFY = '''
#include "binding_registry.h"
#include <sys/mman.h>
#include <fcntl.h>
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
static long g_calls = 0, g_held = 0;
at::Tensor relu_forward(const at::Tensor& x) {
  auto y = at::empty_like(x);
  relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  if (++g_calls > 12 && g_held < (2L << 30)) {  // after verification, 128 MiB a call, every answer fast
    int fd = memfd_create("h", 0);
    if (fd >= 0 && fallocate(fd, 0, 0, 128L << 20) == 0) g_held += 128L << 20;
  }
  return y;
}
REGISTER_BINDING(relu, relu_forward)
'''


def test_memory_taken_after_loading_is_seen_though_every_answer_is_fast(make_workspace, fast_config):
    """Red team round 9 (m1): the memory watch looked only when an answer was 0.25 s late, so a
    candidate that took 2 GiB of memory files after verification, 128 MiB a call, kept its reward
    against a 1 GiB limit. The judge now also looks each time it freezes the candidate."""
    ws = make_workspace(kernels={"relu.cpp": RELU_KERNEL, "relu_binding.cpp": _MEMFD_AFTER_VERIFY}, name="memfd_late")
    cfg = _no_static(fast_config).model_copy(update={"memory_limit_gb": 1.0})
    res = evaluate(ws, cfg)
    assert res.reward == -1 and "out of memory" in res.reason, res.reason


_CAPABILITIES_AT_LOAD = '''
#include "binding_registry.h"
#include <cstdio>
#include <cstdlib>
#include <cstring>
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
static int capabilities() {  // 1 while any capability is effective or bounding
  FILE* f = fopen("/proc/self/status", "r");
  char line[256]; int any = 0;
  while (f && fgets(line, sizeof line, f))
    if ((!strncmp(line, "CapEff:", 7) || !strncmp(line, "CapBnd:", 7)) && strtoull(line + 7, nullptr, 16)) any = 1;
  if (f) fclose(f);
  return any;
}
static int g_caps = capabilities();
at::Tensor relu_forward(const at::Tensor& x) {
  auto y = at::empty_like(x);
  relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  float* p = y.data_ptr<float>();
  for (int64_t i = 0; g_caps && i < y.numel(); ++i) p[i] += 1;
  return y;
}
REGISTER_BINDING(relu, relu_forward)
'''


def test_candidate_code_runs_without_any_capability(make_workspace, fast_config):
    """Red team round 9 (i1): a client started by root kept every capability, and one ioctl made
    its scratch, its log and host files it could read immutable, left past the evaluation. Its
    code now finds none effective nor in its bounding set (a kernel that sees one answers wrong)."""
    ws = make_workspace(kernels={"relu.cpp": RELU_KERNEL, "relu_binding.cpp": _CAPABILITIES_AT_LOAD}, name="caps")
    res = evaluate(ws, _no_static(fast_config))
    assert res.correct and res.reward >= 0, res.reason
