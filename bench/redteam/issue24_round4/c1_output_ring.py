"""An own output pool, not "recycling" by the judge's definition: each input slot gets a ring of R
output buffers (R > HOLD_GENERATIONS = 2), so a buffer is only reused once the judge has released
the batch that returned it. On a big memory-bound op (relu over 64 MiB) eager pays fresh pages
(mmap + page faults) every call; the ring never does. The doc says such a pool "saves allocation
cost (the same for both clients under one allocator policy)". MODE: honest | ring3 | ring4; rows=N for an N x 4096 input (default 4096: 64 MiB)."""
import sys
from common import *
TASK = '''
import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)
def get_inputs():
    return [torch.randn(4096, 4096)]
def get_init_inputs():
    return []
'''
KERNEL = '''
#include <cstdint>
extern "C" void relu_kernel(const float* x, float* y, int64_t n) {
  #pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
'''
BINDING = '''
#include "binding_registry.h"
#include <map>
#include <vector>
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
static std::map<const void*, std::pair<int64_t, std::vector<at::Tensor>>> g_pool;
at::Tensor relu_forward(const at::Tensor& x) {
  CHECK_CONTIGUOUS(x); CHECK_DTYPE(x, at::kFloat);
  at::Tensor y;
  const int64_t R = RING;
  if (R == 0) {
    y = at::empty_like(x);
  } else {
    auto& e = g_pool[x.data_ptr()];
    if ((int64_t)e.second.size() < R) { e.second.push_back(at::empty_like(x)); y = e.second.back(); }
    else { y = e.second[e.first % R]; }
    e.first++;
  }
  relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}
REGISTER_BINDING(relu, relu_forward)
'''
MODEL = '''
import torch.nn as nn
import cpu_extension
class ModelNew(nn.Module):
    def forward(self, x):
        return cpu_extension.relu(x.contiguous())
'''
args = sys.argv[1:]
size = next((a.split("=")[1] for a in args if a.startswith("rows=")), None)
if size:
    TASK = TASK.replace("torch.randn(4096, 4096)", f"torch.randn({size}, 4096)")
for mode in [a for a in args if not a.startswith("rows=")] or ["ring3", "honest"]:
    ring = {"honest": "0", "ring3": "3", "ring4": "4"}[mode]
    run(f"c1_{mode}" + (f"_rows{size}" if size else ""), MODEL, {"relu.cpp": KERNEL, "relu_binding.cpp": BINDING.replace("RING", ring)}, task=TASK, note=mode)
