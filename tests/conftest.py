"""Shared fixtures: one build cache for the whole session (the PCH is built once), and a
factory for CPU workspaces holding a given candidate."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import pytest
import torch

from cuda_agent.evaluation import EvalConfig, TimingConfig
from cuda_agent.tasks import Task
from cuda_agent.workspace import Workspace, create_workspace

RELU_TASK = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(64, 1024)]

def get_init_inputs():
    return []
'''

RELU_MODEL_NEW = '''
import torch.nn as nn
import cpu_extension

class ModelNew(nn.Module):
    def forward(self, x):
        return cpu_extension.relu(x.contiguous())
'''

RELU_BINDING = '''
#include "binding_registry.h"
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
at::Tensor relu_forward(const at::Tensor& x) {
  CHECK_CONTIGUOUS(x); CHECK_DTYPE(x, at::kFloat);
  auto y = at::empty_like(x);
  relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}
REGISTER_BINDING(relu, relu_forward)
'''

RELU_KERNEL = '''
#include <cstdint>
extern "C" void relu_kernel(const float* x, float* y, int64_t n) {
  #pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
'''


def pytest_configure(config: pytest.Config) -> None:
    """Where bubblewrap cannot seal bash (a machine without it), the agent's and training's tests run
    bash unsealed, as an operator there would (CUDA_AGENT_SEAL=0): they test the loop, not the seal.
    The seal's own tests skip, saying so; the refusal without it is tested with the seal asked for."""
    from cuda_agent.agent import shell

    if shell.SEAL_ENV not in os.environ and shell.bwrap_problem():
        os.environ[shell.SEAL_ENV] = "0"


def pytest_report_header(config: pytest.Config) -> str | None:
    from cuda_agent.agent import shell

    if shell.seal_by_default():
        return None
    return f"agent bash unsealed ({shell.SEAL_ENV}=0): {shell.bwrap_problem() or 'set by the caller'}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def nest_folders(root: Path, depth: int) -> None:
    """`depth` folders, one in the next, under `root`: deeper than a path may be long, so made
    through folder handles (a hostile candidate's scratch, red team round 8)."""
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root, os.O_RDONLY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(fd)


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    shared = os.environ.get("CUDA_AGENT_TEST_CACHE")
    path = Path(shared) if shared else tmp_path_factory.mktemp("cache")
    os.environ["CUDA_AGENT_CACHE"] = str(path)
    return path


@pytest.fixture()
def fast_config(cache_dir: Path) -> EvalConfig:
    """CPU config with a short timing budget and no torch.compile (that has its own test)."""
    return EvalConfig(backend="cpu", compile_mode=None, cache_dir=str(cache_dir), worker_timeout_s=120,
                      memory_limit_gb=3.0,
                      timing=TimingConfig(budget_s=0.2, min_trials=20, warmup_ms=5))


WorkspaceFactory = Callable[..., Workspace]


def cpu_workspace(root: Path, cache_dir: Path, model_new: str = RELU_MODEL_NEW,
                  kernels: dict[str, str] | None = None, task_source: str = RELU_TASK,
                  name: str = "relu") -> Workspace:
    """A CPU workspace at `root`: the task, `model_new.py` and its kernels (the honest relu by default);
    the tests' `make_workspace` and the red team's driver both build theirs so."""
    task = Task.from_source(task_source, name=name)
    ws = create_workspace(task, root, "cpu", cache_dir=cache_dir, overwrite=True)
    (ws.root / "model_new.py").write_text(model_new)
    files = kernels if kernels is not None else {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": RELU_BINDING}
    for fname, text in files.items():
        (ws.root / "kernels" / fname).write_text(text)
    return ws


@pytest.fixture()
def make_workspace(tmp_path: Path, cache_dir: Path) -> WorkspaceFactory:
    def make(model_new: str = RELU_MODEL_NEW, kernels: dict[str, str] | None = None,
             task_source: str = RELU_TASK, name: str = "relu") -> Workspace:
        return cpu_workspace(tmp_path / name, cache_dir, model_new, kernels, task_source, name)

    return make
