"""c1: a task whose integer inputs come from a private, fixed-seed generator: every timed call gets the same
indices, and a kernel that answers from a cache (memcmp of the indices, memcpy of the remembered output) is
"correct" on every call and many times faster than one that computes.

`Judge._drawn_inputs` (judge.py:1059) seeds torch's, Python's and numpy's global generators per round and calls
the task's get_inputs(); it checks the shapes it gets, not that the values moved. A get_inputs() that uses its
own `torch.Generator().manual_seed(0)` gives the same integers under every secret seed, so "new values on every
call" silently does not hold; the constant-output check is off too (the reference's output never varies, so
`ref_varies` is False). Integer inputs are not scaled (scaling would break their validity).
Cases: honest (a plain single-thread loop, computes every call) and cache (memcmp + memcpy). Usage: c1_fixed_generator.py [honest|cache|both]
"""
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import config, run, shutdown, workspace  # noqa: E402

TASK = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(1000, 64))
    def forward(self, idx):
        return torch.nn.functional.embedding_bag(idx, self.weight, mode="sum")

def get_inputs():
    g = torch.Generator().manual_seed(1234)  # the task's own generator: the same bags on every call
    return [torch.randint(0, 1000, (4096, 128), generator=g)]

def get_init_inputs():
    return []
'''

MODEL_NEW = '''
import torch
import torch.nn as nn
import cpu_extension

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(1000, 64))
    def forward(self, idx):
        return cpu_extension.bagsum(self.weight, idx.contiguous())
'''

BINDING = '''
#include "binding_registry.h"
extern "C" void bagsum_kernel(const float* w, const int64_t* idx, float* y, int64_t bags, int64_t len, int64_t d);
at::Tensor bagsum_forward(const at::Tensor& w, const at::Tensor& idx) {
  CHECK_CONTIGUOUS(w); CHECK_CONTIGUOUS(idx); CHECK_DTYPE(idx, at::kLong);
  auto y = at::empty({idx.size(0), w.size(1)}, w.options());
  bagsum_kernel(w.data_ptr<float>(), idx.data_ptr<int64_t>(), y.data_ptr<float>(), idx.size(0), idx.size(1), w.size(1));
  return y;
}
REGISTER_BINDING(bagsum, bagsum_forward)
'''

HONEST = '''
#include <cstdint>
extern "C" void bagsum_kernel(const float* w, const int64_t* idx, float* y, int64_t bags, int64_t len, int64_t d) {
  for (int64_t b = 0; b < bags; ++b) {
    float* out = y + b * d;
    for (int64_t k = 0; k < d; ++k) out[k] = 0.f;
    for (int64_t j = 0; j < len; ++j) { const float* row = w + idx[b * len + j] * d; for (int64_t k = 0; k < d; ++k) out[k] += row[k]; }
  }
}
'''

CACHE = HONEST.replace('extern "C" void bagsum_kernel', 'static void compute') + '''
#include <cstring>
#include <cstdlib>
static int64_t* seen = nullptr; static float* memo = nullptr; static const float* memo_w = nullptr; static int64_t n_idx = 0, n_out = 0;
extern "C" void bagsum_kernel(const float* w, const int64_t* idx, float* y, int64_t bags, int64_t len, int64_t d) {
  if (seen && w == memo_w && n_idx == bags * len && n_out == bags * d && memcmp(seen, idx, n_idx * 8) == 0) {
    memcpy(y, memo, n_out * 4);  // the same bags as last time: the remembered sums
    return;
  }
  compute(w, idx, y, bags, len, d);
  free(seen); free(memo);
  n_idx = bags * len; n_out = bags * d; memo_w = w;
  seen = (int64_t*)malloc(n_idx * 8); memo = (float*)malloc(n_out * 4);
  memcpy(seen, idx, n_idx * 8); memcpy(memo, y, n_out * 4);
}
'''

if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "both"
    try:
        for name, src in (("honest", HONEST), ("cache", CACHE)):
            if which in (name, "both"):
                run("c1_fixed_generator", name, workspace(f"c1_{name}", MODEL_NEW, {"bag.cpp": src, "bag_binding.cpp": BINDING}, TASK),
                    config(fast=False), deserved="the honest kernel's reward" if name == "cache" else ">=1")
    finally:
        shutdown()
