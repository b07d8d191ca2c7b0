"""Skipped work inside the tolerance: a mean over rows of rand() computed from the first
1/FRAC of each row only (every guard on). Control: the same kernel reading the whole row."""
import sys
from common import *

TASK = '''
import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        return torch.mean(x, dim=1)
def get_inputs():
    return [torch.rand(16, 1 << 20)]
def get_init_inputs():
    return []
'''
MODEL = '''
import torch.nn as nn
import cpu_extension
class ModelNew(nn.Module):
    def forward(self, x):
        return cpu_extension.rowmean(x.contiguous())
'''
KERNEL = '''
#include <cstdint>
extern "C" void rowmean_kernel(const float* x, float* y, int64_t rows, int64_t cols, int64_t frac) {
  int64_t used = cols / frac;
  #pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r) {
    const float* p = x + r * cols;
    float acc[16] = {0};
    for (int64_t i = 0; i < used; i += 16)
      #pragma omp simd
      for (int j = 0; j < 16; ++j) acc[j] += p[i + j];
    float s = 0.f;
    for (int j = 0; j < 16; ++j) s += acc[j];
    y[r] = s / (float)used;
  }
}
'''
BINDING = '''
#include "binding_registry.h"
extern "C" void rowmean_kernel(const float* x, float* y, int64_t rows, int64_t cols, int64_t frac);
at::Tensor rowmean_forward(const at::Tensor& x) {
  CHECK_CONTIGUOUS(x); CHECK_DTYPE(x, at::kFloat);
  auto y = at::empty({x.size(0)}, x.options());
  rowmean_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.size(0), x.size(1), FRAC);
  return y;
}
REGISTER_BINDING(rowmean, rowmean_forward)
'''
for frac in [int(a) for a in sys.argv[1:]] or [1, 8]:
    run(f"a1b_bigrow_frac{frac}", MODEL, {"rowmean.cpp": KERNEL, "rowmean_binding.cpp": BINDING.replace("FRAC", str(frac))}, task=TASK)
