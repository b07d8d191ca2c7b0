"""e3 (round 21, mirror): a task that makes its inputs at import (as Ops-6K rows do): x and a graph's edge_index,
the graph declared fixed (FIXED_INPUTS = [1]: "the task's, like a weight ... the source is not run again for them").
x made at import keeps its values under every seed, so the judge runs the source again for every draw
(`_ImportedAgain`), and that draws the declared graph anew too: it is no constant (cases.py I1: constants []).
A kernel that builds its CSR of the declared graph on the first call (what the declaration allows) is judged
against one that reads the edges every call.
Run: cd /work/main && .venv/bin/python bench/redteam/issue24_round21/e3_declared_graph_redrawn.py [reads|assumes|all]
"""
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import config, run, shutdown, workspace  # noqa: E402

TASK = '''
import torch
import torch.nn as nn

N, E, F = 4096, 16384, 32
x = torch.randn(N, F)
edge_index = torch.randint(0, N, (2, E))   # the benchmark's graph, fixed by design

class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x, edge_index):
        return torch.zeros_like(x).index_add_(0, edge_index[1], x[edge_index[0]])

def get_inputs():
    return [x, edge_index]

FIXED_INPUTS = [1]

def get_init_inputs():
    return []
'''

MODEL_NEW = '''
import torch.nn as nn
import cpu_extension

class ModelNew(nn.Module):
    def forward(self, x, edge_index):
        return cpu_extension.gather_add(x.contiguous(), edge_index.contiguous())
'''

BINDING = '''
#include "binding_registry.h"
extern "C" void ga_kernel(const float* x, const int64_t* ei, float* y, int64_t n, int64_t e, int64_t f);
at::Tensor ga_forward(const at::Tensor& x, const at::Tensor& ei) {
  CHECK_CONTIGUOUS(x); CHECK_CONTIGUOUS(ei);
  auto y = at::empty_like(x);
  ga_kernel(x.data_ptr<float>(), ei.data_ptr<int64_t>(), y.data_ptr<float>(), x.size(0), ei.size(1), x.size(1));
  return y;
}
REGISTER_BINDING(gather_add, ga_forward)
'''

KERNEL = '''
#include <cstdint>
#include <cstdlib>
#include <cstring>
static int64_t* rowptr = nullptr; static int64_t* srcs = nullptr;
static void build(const int64_t* ei, int64_t n, int64_t e) {
  free(rowptr); free(srcs);
  rowptr = (int64_t*)calloc(n + 1, 8); srcs = (int64_t*)malloc(e * 8);
  for (int64_t k = 0; k < e; ++k) rowptr[ei[e + k] + 1]++;
  for (int64_t i = 0; i < n; ++i) rowptr[i + 1] += rowptr[i];
  int64_t* fill = (int64_t*)malloc(n * 8); memcpy(fill, rowptr, n * 8);
  for (int64_t k = 0; k < e; ++k) srcs[fill[ei[e + k]]++] = ei[k];
  free(fill);
}
extern "C" void ga_kernel(const float* x, const int64_t* ei, float* y, int64_t n, int64_t e, int64_t f) {
  if (!ASSUME || !rowptr) build(ei, n, e);   // ASSUME: the declared graph is the task's: its CSR built once
  #pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) {
    float* o = y + i * f; for (int64_t c = 0; c < f; ++c) o[c] = 0.f;
    for (int64_t k = rowptr[i]; k < rowptr[i + 1]; ++k) { const float* s = x + srcs[k] * f; for (int64_t c = 0; c < f; ++c) o[c] += s[c]; }
  }
}
'''


def main(which: str) -> None:
    cfg = config()
    kinds = ["reads", "assumes"] if which == "all" else [which]
    for kind in kinds:
        src = KERNEL.replace("ASSUME", "1" if kind == "assumes" else "0")
        ws = workspace(f"e3_{kind}", MODEL_NEW, {"ga.cpp": src, "ga_binding.cpp": BINDING}, TASK)
        run("e3_declared_graph_redrawn", kind, ws, cfg,
            deserved="correct (the declared graph is the task's; the doc says its source is not run again)")
    shutdown()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "all")
