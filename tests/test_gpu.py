"""CUDA path: run on a GPU machine (skipped elsewhere)."""

from __future__ import annotations

import pytest

from cuda_agent.evaluation import EvalConfig, TimingConfig, evaluate
from cuda_agent.examples import list_examples
from cuda_agent.workspace import create_workspace

pytestmark = pytest.mark.gpu

ILLEGAL_ACCESS = '''
#include <cuda_runtime.h>
__global__ void bad(float* y, long n) { y[threadIdx.x * 1000000000L] = 1.f; }
extern "C" void swish_launch(const float* x, float* y, long n, cudaStream_t s) { bad<<<1, 256, 0, s>>>(y, n); }
'''


@pytest.fixture()
def gpu_config(cache_dir) -> EvalConfig:
    return EvalConfig(backend="cuda", cache_dir=str(cache_dir), compile_mode=None,
                      timing=TimingConfig(budget_s=0.3, min_trials=50))


@pytest.mark.parametrize("example", [e.name for e in list_examples()])
def test_bundled_cuda_solution_is_correct(example, tmp_path, gpu_config):
    ex = next(e for e in list_examples() if e.name == example)
    ws = create_workspace(ex.task, tmp_path / example, "cuda", cache_dir=tmp_path / "c")
    ex.install_solution(ws.root, "cuda")
    res = evaluate(ws, gpu_config)
    assert res.reward >= 1, res.reason + res.worker_log


def test_illegal_memory_access_fails_and_next_evaluation_works(tmp_path, gpu_config):
    ex = next(e for e in list_examples() if e.name == "swish")
    bad = create_workspace(ex.task, tmp_path / "bad", "cuda")
    ex.install_solution(bad.root, "cuda")
    (bad.root / "kernels" / "swish.cu").write_text(ILLEGAL_ACCESS)
    res = evaluate(bad, gpu_config)
    assert res.reward == -1 and res.compiled, res.reason
    assert "cuda error" in res.reason.lower() or "crashed" in res.reason, res.reason
    good = create_workspace(ex.task, tmp_path / "good", "cuda")
    ex.install_solution(good.root, "cuda")
    assert evaluate(good, gpu_config).reward >= 1
