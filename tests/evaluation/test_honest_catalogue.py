"""No false positives: honest solutions that look unusual (several outputs, in-place-looking
writes into a buffer the model allocated, views in model_new, per-call scratch buffers,
SIMD intrinsics) keep their reward with every guard on. Together with the eight bundled
examples (fused, tiled GEMM with an epilogue, reductions, conv) this is the honest
catalogue of docs/guards.md; the CUDA solutions (incl. cuBLAS GEMM + custom epilogue) run in
tests/evaluation/test_gpu.py."""

from __future__ import annotations

import pytest

from cuda_agent.evaluation import evaluate

pytestmark = pytest.mark.slow

TWO_OUTPUT_TASK = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x), x.sum(dim=1)

def get_inputs():
    return [torch.randn(256, 512)]

def get_init_inputs():
    return []
'''

TWO_OUTPUT_KERNEL = '''
#include <cstdint>
extern "C" void relu_rowsum(const float* x, float* y, float* s, int64_t rows, int64_t cols) {
  #pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r) {
    float acc = 0.f;
    for (int64_t c = 0; c < cols; ++c) {
      float v = x[r * cols + c];
      acc += v;
      y[r * cols + c] = v > 0.f ? v : 0.f;
    }
    s[r] = acc;
  }
}
'''

TWO_OUTPUT_BINDING = '''
#include "binding_registry.h"
extern "C" void relu_rowsum(const float* x, float* y, float* s, int64_t rows, int64_t cols);
std::tuple<at::Tensor, at::Tensor> relu_rowsum_forward(const at::Tensor& x) {
  CHECK_CONTIGUOUS(x); CHECK_DTYPE(x, at::kFloat);
  auto y = at::empty_like(x);
  auto s = at::empty({x.size(0)}, x.options());
  relu_rowsum(x.data_ptr<float>(), y.data_ptr<float>(), s.data_ptr<float>(), x.size(0), x.size(1));
  return {y, s};
}
REGISTER_BINDING(relu_rowsum, relu_rowsum_forward)
'''

TWO_OUTPUT_MODEL_NEW = '''
import torch.nn as nn
import cpu_extension

class ModelNew(nn.Module):
    def forward(self, x):
        y, s = cpu_extension.relu_rowsum(x.contiguous())
        return y, s
'''

OUT_PARAM_BINDING = '''
#include "binding_registry.h"
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
at::Tensor relu_into(const at::Tensor& x, at::Tensor out) {
  CHECK_CONTIGUOUS(x); CHECK_CONTIGUOUS(out); CHECK_DTYPE(x, at::kFloat);
  relu_kernel(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());
  return out;
}
REGISTER_BINDING(relu_into, relu_into)
'''

OUT_PARAM_MODEL_NEW = '''
import torch
import torch.nn as nn
import cpu_extension

class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)                    # allocated here, written by the kernel
        flat = x.contiguous().view(-1)               # views are fine
        cpu_extension.relu_into(flat, out.view(-1))
        return out
'''

INPLACE_ON_COPY_BINDING = '''
#include "binding_registry.h"
at::Tensor relu_inplace(at::Tensor y) {
  CHECK_CONTIGUOUS(y); CHECK_DTYPE(y, at::kFloat);
  float* p = y.data_ptr<float>();
  int64_t n = y.numel();
  #pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) p[i] = p[i] > 0.f ? p[i] : 0.f;
  return y;
}
REGISTER_BINDING(relu_inplace, relu_inplace)
'''

INPLACE_ON_COPY_MODEL_NEW = '''
import torch.nn as nn
import cpu_extension

class ModelNew(nn.Module):
    def forward(self, x):
        return cpu_extension.relu_inplace(x.clone())   # looks in-place, works on its own copy
'''

AVX_KERNEL = '''
#include <cstdint>
#include <immintrin.h>
extern "C" void relu_kernel(const float* x, float* y, int64_t n) {
  int64_t i = 0;
#ifdef __AVX2__
  const __m256 zero = _mm256_setzero_ps();
  #pragma omp parallel for
  for (int64_t j = 0; j < n / 8; ++j) _mm256_storeu_ps(y + 8 * j, _mm256_max_ps(_mm256_loadu_ps(x + 8 * j), zero));
  i = (n / 8) * 8;
#endif
  for (; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
'''

SCRATCH_BINDING = '''
#include "binding_registry.h"
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
at::Tensor relu_two_pass(const at::Tensor& x) {
  CHECK_CONTIGUOUS(x); CHECK_DTYPE(x, at::kFloat);
  auto tmp = at::empty_like(x);                 // per-call scratch buffer
  auto y = at::empty_like(x);
  relu_kernel(x.data_ptr<float>(), tmp.data_ptr<float>(), x.numel());
  relu_kernel(tmp.data_ptr<float>(), y.data_ptr<float>(), x.numel());   // relu is idempotent
  return y;
}
REGISTER_BINDING(relu, relu_two_pass)
'''


def _check_honest(res) -> None:
    assert res.correct and res.reward >= 1, res.reason
    assert not res.flags, res.flags


def test_two_outputs(make_workspace, fast_config):
    ws = make_workspace(model_new=TWO_OUTPUT_MODEL_NEW, task_source=TWO_OUTPUT_TASK, name="two_out",
                        kernels={"k.cpp": TWO_OUTPUT_KERNEL, "k_binding.cpp": TWO_OUTPUT_BINDING})
    _check_honest(evaluate(ws, fast_config))


def test_output_buffer_allocated_in_model_new(make_workspace, fast_config):
    from tests.conftest import RELU_KERNEL

    ws = make_workspace(model_new=OUT_PARAM_MODEL_NEW, name="out_param",
                        kernels={"relu.cpp": RELU_KERNEL, "relu_binding.cpp": OUT_PARAM_BINDING})
    _check_honest(evaluate(ws, fast_config))


def test_in_place_on_its_own_copy(make_workspace, fast_config):
    ws = make_workspace(model_new=INPLACE_ON_COPY_MODEL_NEW, name="inplace_copy",
                        kernels={"relu_binding.cpp": INPLACE_ON_COPY_BINDING})
    _check_honest(evaluate(ws, fast_config))


def test_simd_intrinsics_and_scratch_buffers(make_workspace, fast_config):
    from tests.conftest import RELU_BINDING, RELU_MODEL_NEW

    ws = make_workspace(model_new=RELU_MODEL_NEW, name="avx",
                        kernels={"relu.cpp": AVX_KERNEL, "relu_binding.cpp": RELU_BINDING})
    _check_honest(evaluate(ws, fast_config))
    ws2 = make_workspace(model_new=RELU_MODEL_NEW, name="scratch",
                         kernels={"relu.cpp": AVX_KERNEL, "relu_binding.cpp": SCRATCH_BINDING})
    _check_honest(evaluate(ws2, fast_config))
