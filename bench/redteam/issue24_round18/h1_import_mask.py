"""h1 (round 18): a random 0/1 mask made at import (module level, as Ops-6K rows make inputs) beside an input
drawn in get_inputs(). The mask is the same under every seed, but it has two values, so `_ElementDraws.structure`
calls it the task's structure (share 0) and the check passes on the module imported once: `_ImportedAgain`, which
would move it (it is torch.rand at import), is never tried. Every timed call gets the same mask: a kernel that turned
it into a list of column indices on its first call sums 0.5% of x instead of reading x and the mask.
Run: cd /work/main && .venv/bin/python bench/redteam/issue24_round18/h1_import_mask.py [honest|cache|all] [compile]
`float` as an argument: the mask is a float 0/1 tensor (scaled in the timed rounds, zeros kept: same pattern).
"""

import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import config, run, shutdown, workspace  # noqa: E402

TASK = '''
import torch
import torch.nn as nn

M, K = 1024, 8192
mask = torch.rand(M, K) < 0.005  # which entries of each row count (made once, at import)

class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x, mask):
        return (x * mask).sum(dim=1)

def get_inputs():
    return [torch.randn(M, K), mask]

def get_init_inputs():
    return []
'''

MODEL_NEW = '''
import torch.nn as nn
import cpu_extension

class ModelNew(nn.Module):
    def forward(self, x, mask):
        return cpu_extension.masked_rowsum(x.contiguous(), mask.contiguous())
'''

BINDING = '''
#include "binding_registry.h"
extern "C" void mrs_kernel(const float* x, const void* mask, int is_float, float* y, int64_t m, int64_t k);
at::Tensor mrs_forward(const at::Tensor& x, const at::Tensor& mask) {
  CHECK_CONTIGUOUS(x); CHECK_CONTIGUOUS(mask); CHECK_DTYPE(x, at::kFloat);
  auto y = at::empty({x.size(0)}, x.options());
  mrs_kernel(x.data_ptr<float>(), mask.data_ptr(), mask.scalar_type() == at::kFloat ? 1 : 0, y.data_ptr<float>(),
             x.size(0), x.size(1));
  return y;
}
REGISTER_BINDING(masked_rowsum, mrs_forward)
'''

HONEST = '''
#include <cstdint>
extern "C" void mrs_kernel(const float* x, const void* mask, int is_float, float* y, int64_t m, int64_t k) {
  #pragma omp parallel for
  for (int64_t i = 0; i < m; ++i) {
    const float* r = x + i * k; float s = 0.f;
    if (is_float) { const float* mk = (const float*)mask + i * k; for (int64_t j = 0; j < k; ++j) s += r[j] * mk[j]; }
    else { const bool* mk = (const bool*)mask + i * k; for (int64_t j = 0; j < k; ++j) s += mk[j] ? r[j] : 0.f; }
    y[i] = s;
  }
}
'''

CACHE = '''
#include <cstdint>
#include <cstdlib>
// the mask is the same on every call: its nonzero positions listed once (CSR), then only those x read
static int64_t* rowptr = nullptr; static int32_t* cols = nullptr; static int64_t seen_m = -1, seen_k = -1;
extern "C" void mrs_kernel(const float* x, const void* mask, int is_float, float* y, int64_t m, int64_t k) {
  if (!rowptr || seen_m != m || seen_k != k) {
    free(rowptr); free(cols); seen_m = m; seen_k = k;
    rowptr = (int64_t*)malloc((m + 1) * 8); int64_t nnz = 0;
    for (int64_t i = 0; i < m * k; ++i) nnz += is_float ? ((const float*)mask)[i] != 0.f : ((const bool*)mask)[i];
    cols = (int32_t*)malloc((nnz + 1) * 4); nnz = 0;
    for (int64_t i = 0; i < m; ++i) { rowptr[i] = nnz;
      for (int64_t j = 0; j < k; ++j) if (is_float ? ((const float*)mask)[i * k + j] != 0.f : ((const bool*)mask)[i * k + j]) cols[nnz++] = (int32_t)j; }
    rowptr[m] = nnz;
  }
  #pragma omp parallel for
  for (int64_t i = 0; i < m; ++i) {
    const float* r = x + i * k; float s = 0.f;
    if (is_float) { const float* mk = (const float*)mask + i * k; for (int64_t p = rowptr[i]; p < rowptr[i + 1]; ++p) s += r[cols[p]] * mk[cols[p]]; }
    else for (int64_t p = rowptr[i]; p < rowptr[i + 1]; ++p) s += r[cols[p]];
    y[i] = s;
  }
}
'''

if __name__ == "__main__":
    args = sys.argv[1:]
    which = next((a for a in args if a in ("honest", "cache", "all")), "all")
    compile_mode = "default" if "compile" in args else None
    task = TASK.replace("< 0.005  #", "< 0.005).float()  #").replace("mask = torch.rand", "mask = (torch.rand") \
        if "float" in args else TASK
    tag = ("float" if "float" in args else "bool") + ("+compile" if compile_mode else "")
    try:
        for name, src in (("honest", HONEST), ("cache", CACHE)):
            if which in (name, "all"):
                run("h1_import_mask", f"{name} ({tag})",
                    workspace(f"h1r18_{name}", MODEL_NEW, {"mrs.cpp": src, "mrs_binding.cpp": BINDING}, task),
                    config(fast=False, compile_mode=compile_mode),
                    deserved="the honest kernel's reward" if name == "cache" else ">=1")
    finally:
        shutdown()
