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


# ---- CUDA reward hacks (HACKS.md: other stream, caching allocator, L2) ----------------------
SIDE_STREAM = '''
#include <cuda_runtime.h>
#include <cstdint>
__global__ void swish_slow(const float* x, float* y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) { float v = x[i]; for (int k = 0; k < 200; ++k) v = v * 1.0f; y[i] = x[i] / (1.f + __expf(-x[i])); }
}
extern "C" void swish_launch(const float* x, float* y, int64_t n, cudaStream_t stream) {
  static cudaStream_t hidden = nullptr;       // work the timed stream's events never see
  if (!hidden) cudaStreamCreateWithFlags(&hidden, cudaStreamNonBlocking);
  for (int rep = 0; rep < 20; ++rep)
    swish_slow<<<(unsigned)((n + 255) / 256), 256, 0, hidden>>>(x, y, n);
}
'''

UNWRITTEN = '''
#include "binding_registry.h"
extern "C" void swish_launch(const float* x, float* y, int64_t n, cudaStream_t stream);
at::Tensor swish_forward(const at::Tensor& x) {
  return at::empty_like(x);                   // never written: whatever the allocator held
}
REGISTER_BINDING(swish, swish_forward)
'''

L2_PERSIST = '''
#include <cuda_runtime.h>
#include <cstdint>
__global__ void swish_k(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] / (1.f + __expf(-x[i]));
}
extern "C" void swish_launch(const float* x, float* y, int64_t n, cudaStream_t stream) {
  static bool once = false;
  if (!once) { cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 32 << 20); cudaGetLastError(); once = true; }
  cudaStreamAttrValue attr = {};
  attr.accessPolicyWindow.base_ptr = (void*)x;  // keep the input resident in L2 across trials
  attr.accessPolicyWindow.num_bytes = n * sizeof(float) < (32 << 20) ? n * sizeof(float) : (32 << 20);
  attr.accessPolicyWindow.hitRatio = 1.0f;
  attr.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
  attr.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
  cudaStreamSetAttribute(stream, cudaStreamAttributeAccessPolicyWindow, &attr);
  cudaGetLastError();                           // best effort: a refused window is no error
  swish_k<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(x, y, n);
}
'''
HONEST_SCALAR = L2_PERSIST.replace("cudaStreamSetAttribute(stream", "if (false) cudaStreamSetAttribute(stream").replace(
    "if (!once) { cudaDeviceSetLimit", "if (false) { cudaDeviceSetLimit")


def _swish_ws(tmp_path, name, cache_dir, kernel: str | None = None, binding: str | None = None):
    ex = next(e for e in list_examples() if e.name == "swish")
    ws = create_workspace(ex.task, tmp_path / name, "cuda", cache_dir=cache_dir)
    ex.install_solution(ws.root, "cuda")
    if kernel is not None:
        (ws.root / "kernels" / "swish.cu").write_text(kernel)
    if binding is not None:
        (ws.root / "kernels" / "swish_binding.cpp").write_text(binding)
    return ws


def _no_static(cfg: EvalConfig, **kw) -> EvalConfig:
    from cuda_agent.evaluation import GuardConfig

    return cfg.model_copy(update={"guards": GuardConfig(static_checks=False, **kw)})


def test_work_on_a_hidden_stream_is_counted(tmp_path, gpu_config, cache_dir):
    ws = _swish_ws(tmp_path, "stream", cache_dir, kernel=SIDE_STREAM)
    res = evaluate(ws, _no_static(gpu_config, symbols=False))
    # the judge's interval ends only when the device is idle: the hidden stream's 20 passes are inside
    assert not res.faster_than_eager and (not res.correct or res.speedup_vs_eager < 1), res.reason
    print(f"\nhidden stream: {res.reason[:160]}")


def test_output_left_to_the_caching_allocator_is_incorrect(tmp_path, gpu_config, cache_dir):
    ws = _swish_ws(tmp_path, "alloc", cache_dir, binding=UNWRITTEN)
    res = evaluate(ws, _no_static(gpu_config, symbols=False))
    assert res.reward == -1 and "incorrect" in res.reason, res.reason


SPIN = '''
#include <cuda_runtime.h>
#include <cstdint>
__global__ void spin(long long cycles) { long long t0 = clock64(); while (clock64() - t0 < cycles) {} }
__global__ void swish_k(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] / (1.f + __expf(-x[i]));
}
extern "C" void swish_launch(const float* x, float* y, int64_t n, cudaStream_t stream) {
  static cudaStream_t hidden = nullptr;
  if (!hidden) cudaStreamCreateWithFlags(&hidden, cudaStreamNonBlocking);
  static int launches = 0;
  if (launches++ < SPIN_LAUNCHES) spin<<<132, 32, 0, hidden>>>(SPIN_CYCLES);  // busy after "done"
  swish_k<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(x, y, n);
}
'''

NO_SYNC = '''
import torch
import torch.nn as nn
import cuda_extension
torch.cuda.synchronize = lambda *a, **k: None        # the harness's "wait for the device" is gone

class ModelNew(nn.Module):
    def forward(self, x):
        return cuda_extension.swish(x.contiguous())
'''


def test_work_left_running_after_done_is_caught(tmp_path, gpu_config, cache_dir):
    ws = _swish_ws(tmp_path, "spin", cache_dir, kernel=SPIN.replace("SPIN_CYCLES", "20000000LL").replace("SPIN_LAUNCHES", "1000000"))  # ~10 ms each call
    (ws.root / "model_new.py").write_text(NO_SYNC)
    res = evaluate(ws, _no_static(gpu_config, symbols=False))
    assert res.reward <= 1, res.reason
    print(f"\nwork left on the device: reward {res.reward}: {res.reason[:200]}")


def test_a_long_kernel_cannot_slow_the_baselines(tmp_path, gpu_config, cache_dir):
    # one ~1.5 s kernel, left running while the judge times eager and compile
    ws = _swish_ws(tmp_path, "hog", cache_dir, kernel=SPIN.replace("SPIN_CYCLES", "3000000000LL").replace("SPIN_LAUNCHES", "1"))
    (ws.root / "model_new.py").write_text(NO_SYNC)
    res = evaluate(ws, _no_static(gpu_config, symbols=False))
    assert res.reward <= 1, res.reason
    print(f"\nlong kernel vs baselines: reward {res.reward}: {res.reason[:200]}")


def test_l2_persistence_does_not_pay(tmp_path, gpu_config, cache_dir):
    cfg = _no_static(gpu_config, symbols=False)
    honest = evaluate(_swish_ws(tmp_path, "l2-honest", cache_dir, kernel=HONEST_SCALAR), cfg)
    l2 = evaluate(_swish_ws(tmp_path, "l2", cache_dir, kernel=L2_PERSIST), cfg)
    assert honest.correct and l2.correct, (honest.reason, l2.reason)
    # each against eager in its own evaluation (what the reward reads): two evaluations' absolute
    # times differ by more than 10% on an H100 for one and the same kernel
    gain = l2.speedup_vs_eager / honest.speedup_vs_eager
    print(f"\nL2 persistence: honest {honest.speedup_vs_eager:.3f}x vs eager ({honest.time_ms.candidate * 1e3:.1f} us), "
          f"persisting {l2.speedup_vs_eager:.3f}x ({l2.time_ms.candidate * 1e3:.1f} us), gain {gain:.3f}x")
    assert gain < 1.10, f"L2 persistence made the same kernel {gain:.2f}x faster"


def test_sandbox_is_active_on_the_gpu_worker(tmp_path, gpu_config, cache_dir):
    res = evaluate(_swish_ws(tmp_path, "sandbox", cache_dir), gpu_config)
    assert res.reward >= 1, res.reason
    print(f"\nsandbox on GPU: {res.sandbox}")
    assert res.sandbox.get("file_size") and "landlock" in res.sandbox


# torch's OpenMP pool and the driver's threads exist before the candidate sandbox; candidate code
# that runs on them must not write outside its scratch dir (Landlock binds threads started later)
POOL_WRITE = '''
import ctypes
import torch.nn as nn
import cuda_extension

class ModelNew(nn.Module):
    def forward(self, x):
        gomp = [ln.split()[-1] for ln in open('/proc/self/maps') if 'libgomp' in ln]
        if gomp:
            libc = ctypes.CDLL(None)
            body = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(lambda _: libc.open(TARGET, 0o101, 0o644) and None)
            ctypes.CDLL(gomp[0]).GOMP_parallel(body, None, 8, 0)
        return cuda_extension.swish(x.contiguous())
'''


def test_threads_started_before_the_sandbox_cannot_write_outside(tmp_path, gpu_config, cache_dir):
    target = tmp_path / "pool-leak.txt"
    ws = _swish_ws(tmp_path, "pool", cache_dir)
    (ws.root / "model_new.py").write_text(POOL_WRITE.replace("TARGET", repr(str(target).encode())))
    res = evaluate(ws, _no_static(gpu_config))
    print(f"\npool write: reward {res.reward}, threads at restriction {res.sandbox.get('threads_at_restriction')}, "
          f"before threads {res.sandbox.get('landlock_before_threads')}: {res.reason[:160]}")
    assert not target.exists(), "a thread started before the sandbox wrote outside the scratch dir"
    assert str(res.sandbox.get("landlock_before_threads", "")).startswith("abi"), res.sandbox


def test_the_input_arena_is_an_allocation_of_its_own():
    """Issue 24: the arena was a block of torch's caching allocator, and a client maps the whole
    allocation an IPC handle names: a 3 MiB arena carved from a 20 MiB segment showed the client
    every other judge tensor in that segment. Now the allocation holds the arena alone (its
    slack zeroed), whatever the judge allocated before."""
    import torch

    from cuda_agent.backends import get_backend

    backend = get_backend("cuda")
    ipc = backend._ipc()
    neighbour = torch.full((5 << 20,), 7, dtype=torch.uint8, device="cuda")  # judge data in a shared segment
    for nbytes in (3 << 20, 100_000, (64 << 20) + 5):
        arena = backend.make_arena(nbytes)
        base, size = ipc.allocation_of(arena.raw.data_ptr())
        assert base == arena.raw.data_ptr() and nbytes <= size < nbytes + (2 << 20), (nbytes, size)
        mapped = ipc.tensor_at(arena.describe()["handle"])  # all that a client maps
        assert mapped.numel() == size and not bool(mapped.any())
        del arena, mapped
    assert int(neighbour[0]) == 7


EMPTY_OUTPUT_TASK = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, a, b):
        return torch.relu(a), torch.relu(b)

def get_inputs():
    return [torch.randn(256, 1024), torch.randn(64, 0)]

def get_init_inputs():
    return []
'''


def test_a_task_with_an_empty_output_keeps_the_references_reward(tmp_path, gpu_config):
    """Red team round 14 (h1): an empty output's address is 0, which CUDA cannot export and the
    reader refused: every candidate of such a task got -1. The reference as its own solution
    gets reward 1."""
    res = _torch_solution(tmp_path, gpu_config, EMPTY_OUTPUT_TASK, "empty_output")
    assert res.reward == 1, res.reason + res.worker_log


def _torch_solution(tmp_path, cfg, task_source: str, name: str, model_new: str | None = None):  # type: ignore[no-untyped-def]
    """A torch-only solution (the reference as its own, or `model_new`) evaluated under the rules
    `bench run --solutions reference` uses: only the guards that forbid torch code off."""
    from cuda_agent.benchmark.jobs import reference_model_new
    from cuda_agent.benchmark.solutions import SINGLE_FILE_BINDING, SINGLE_FILE_BINDING_TEXT, reference_config
    from cuda_agent.tasks import Task

    task = Task.from_source(task_source, name=name, origin="test")
    ws = create_workspace(task, tmp_path / name, "cuda", cache_dir=tmp_path / "c")
    (ws.root / "model_new.py").write_text(model_new or reference_model_new(task.source))
    (ws.root / SINGLE_FILE_BINDING).write_text(SINGLE_FILE_BINDING_TEXT)
    return evaluate(ws, reference_config(cfg))


HOST_OUTPUT_TASK = '''
import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x), F.one_hot(torch.arange(10), num_classes=10).float()  # the second on the host

def get_inputs():
    return [torch.randn(256, 1024)]

def get_init_inputs():
    return []
'''


def test_an_output_made_on_the_host_keeps_the_references_reward(tmp_path, gpu_config):
    """Ops-6K row 30 on an H100 (session 9): its forward makes one output on the host (`one_hot` of an
    `arange` with no device), which no CUDA IPC handle names: "the baseline client failed", every
    candidate -1. Host outputs go onto the device, in every client alike, and the reference as its
    own solution gets reward 1."""
    res = _torch_solution(tmp_path, gpu_config, HOST_OUTPUT_TASK, "host_output")
    assert res.reward == 1, res.reason + res.worker_log


DISTANCE_TASK = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, scores, distance):
        return (scores - 0.25 * distance).softmax(-1)

def get_inputs():
    n = torch.arange(1024, dtype=torch.float32)
    return [torch.randn(8, 1024, 1024), (n[:, None] - n[None]).abs()]

def get_init_inputs():
    return []

FIXED_INPUTS = [1]
'''

ASSUMES_DISTANCES = '''
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, scores, distance):  # the declared distances built here, not read
        n = torch.arange(scores.shape[-1], dtype=scores.dtype, device=scores.device)
        return (scores - 0.25 * (n[:, None] - n[None]).abs()).softmax(-1)
'''


def test_a_kernel_may_assume_what_the_task_declares_fixed(tmp_path, gpu_config):
    """Issue 24 (round 20's way out): ALiBi's distances declared fixed (`FIXED_INPUTS`) are handed to
    every call as the task made them, on the device as on the CPU: a model that builds them itself
    instead of reading them is right on every trial, the secret one and every timed call included."""
    res = _torch_solution(tmp_path, gpu_config, DISTANCE_TASK, "declared_distance", ASSUMES_DISTANCES)
    assert res.correct and res.reward >= 1, res.reason + res.worker_log


def test_a_held_spare_holds_no_device_memory_until_told_to_go():
    """The next evaluation's spares are forked during this one and held (issue 23, twelfth
    session): the driver started, no context, so nothing of the device's memory, which a context
    (~0.5 GiB) would take from this one's timing; told to go, it comes up as any spare."""
    import subprocess
    import time

    from cuda_agent.evaluation.candidate_link import CandidateLink, ForkServer
    from cuda_agent.evaluation.judge import _candidate_env

    def on_device(pid: int) -> bool:
        table = subprocess.run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
                               capture_output=True, text=True, timeout=30).stdout.split()
        return str(pid) in table

    server = ForkServer("cuda", _candidate_env(True))
    try:
        assert server.ready(180), server.log_tail()
        link = CandidateLink("cuda", _candidate_env(True), forkserver=server, held=True)
        try:
            link.await_held(time.monotonic() + 60)
            assert link.forked and link.alive() and not on_device(link.pid())
            link.go()
            link.await_started(time.monotonic() + 60)
            assert on_device(link.pid()) and "driver" in link.start_steps and "device" in link.start_steps
        finally:
            link.close()
    finally:
        server.close()


@pytest.mark.parametrize("task_name", ["embedding_max_norm", "rare_over_norm", "lazy", "linear_norm"])
def test_a_reference_that_writes_or_shares_its_parameters_keeps_its_reward_on_the_gpu(task_name, tmp_path,
                                                                                      gpu_config):
    """The shared parameters on a real GPU (`Judge.shares_weights`): an Embedding(max_norm) that
    renormalises rows (red team round 24 gave 6 of 14 honest -1 with the rows rarely read), a lazy
    module, and a plain one kept warm. Six evaluations of the reference as its own solution, all reward 1."""
    from tests.evaluation import test_weights_shared as tasks

    source = {"embedding_max_norm": tasks.EMBEDDING_MAX_NORM_TASK, "rare_over_norm": tasks.RARE_OVER_NORM_TASK,
              "lazy": tasks.LAZY_TASK, "linear_norm": tasks.LINEAR_NORM_TASK}[task_name]
    for i in range(6):
        res = _torch_solution(tmp_path / str(i), gpu_config, source, task_name)
        assert res.reward == 1, res.reason + res.worker_log


WRITES_SOME_INPUTS_TASK = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        if x[0, 0] > 0:  # an in-place write that depends on the values: half the seeds' inputs
            x.mul_(2)
        return x * 1.0

def get_inputs():
    return [torch.randn(4096, 4096)]  # 64 MiB out, times the trials: over what the judge holds

def get_init_inputs():
    return []
'''


def test_a_reference_that_writes_only_some_inputs_keeps_its_reward_on_the_gpu(tmp_path, gpu_config):
    """A review of issue 23's fourteenth session: with nothing held, writes were looked for on trial 0
    alone, and a trial whose inputs the forward wrote gave the candidate the written inputs beside the
    output of the unwritten (the reference itself -1). Under eight config seeds, most with trial 0
    unwritten and a later trial written, the reference as its own solution gets reward 1."""
    for seed in range(8):
        res = _torch_solution(tmp_path / str(seed), gpu_config.model_copy(update={"seed": 1000 + seed}),
                              WRITES_SOME_INPUTS_TASK, "writes_some_inputs")
        assert res.reward == 1, f"seed {1000 + seed}: " + res.reason + res.worker_log
