"""g1 (round 22, hostile): a declared input is never scaled in the timed rounds nor in the secret trial
(`keep=state.fixed_inputs` in `_drawn_inputs` and `secret_trial`), so round 3's prefix estimator comes back for
its moving part. The task: a row mean over `x`, whose last eighth of columns is a fixed "register" table (sin of a
non-affine grid, refused undeclared: 12.5% kept, not structure), the rest `torch.rand`; the task declares it,
FIXED_INPUTS = [0], as every refusal advises. The hostile kernel sums the declared part (allowed: the task's) and
estimates the moving part from its first 1/FRAC. The op is
round 3's costlier one, a row mean of exp(2 sin x). Honest control: FRAC = 1.
Run: cd /work/main && .venv/bin/python bench/redteam/issue24_round22/g1_declared_prefix.py [prefix|honest|undeclared|all]
  undeclared: the same prefix kernel on the task without the declaration and with a fixed part of 6% (accepted,
  scaled): the control that the scaling catches it there.
"""
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import config, run, shutdown, workspace  # noqa: E402

TASK = '''
import torch
import torch.nn as nn

ROWS, MOVING, FIXED = 64, 114688, 16384
REGISTERS = torch.sin(torch.arange(FIXED, dtype=torch.float32) ** 1.5 * 0.37) * 0.5 + 0.5   # the task's own table

class Model(nn.Module):
    def forward(self, x):
        return torch.exp(2 * torch.sin(x)).mean(dim=1)

def get_inputs():
    return [torch.cat([torch.rand(ROWS, MOVING), REGISTERS.expand(ROWS, FIXED)], dim=1)]

FIXED_INPUTS = [0]   # the register columns are the task's

def get_init_inputs():
    return []
'''

TASK_UNDECLARED = TASK.replace("FIXED_INPUTS = [0]", "").replace("MOVING, FIXED = 64, 114688, 16384",
                                                                   "MOVING, FIXED = 64, 122880, 8192")

KERNEL = '''
#include <cstdint>
#include <cmath>
extern "C" void rm_kernel(const float* x, float* y, int64_t rows, int64_t moving, int64_t fixed, int64_t frac) {
  const int64_t used = moving / frac, cols = moving + fixed;
  double f = 0.0;   // the declared part (the same in every row, the task's): once a call, from row 0
  for (int64_t i = moving; i < cols; ++i) f += expf(2.0f * sinf(x[i]));
  #pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r) {
    const float* p = x + r * cols;
    float s = 0.0f;
    for (int64_t i = 0; i < used; ++i) s += expf(2.0f * sinf(p[i]));
    y[r] = (float)(((double)s * (double)moving / (double)used + f) / (double)cols);
  }
}
'''

BINDING = '''
#include "binding_registry.h"
extern "C" void rm_kernel(const float* x, float* y, int64_t rows, int64_t moving, int64_t fixed, int64_t frac);
at::Tensor rm_forward(const at::Tensor& x) {
  CHECK_CONTIGUOUS(x);
  auto y = at::empty({x.size(0)}, x.options());
  rm_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.size(0), MOVINGCOLS, x.size(1) - MOVINGCOLS, FRAC);
  return y;
}
REGISTER_BINDING(rowmean, rm_forward)
'''

MODEL_NEW = '''
import torch.nn as nn
import cpu_extension

class ModelNew(nn.Module):
    def forward(self, x):
        return cpu_extension.rowmean(x.contiguous())
'''


def main(which: str) -> None:
    cfg = config()
    cases = {"prefix": (TASK, 114688, 4), "honest": (TASK, 114688, 1), "undeclared": (TASK_UNDECLARED, 122880, 4)}
    for kind in (list(cases) if which == "all" else [which]):
        task, moving, frac = cases[kind]
        b = BINDING.replace("MOVINGCOLS", str(moving)).replace("FRAC", str(frac))
        ws = workspace(f"g1_{kind}", MODEL_NEW, {"rm.cpp": KERNEL, "rm_binding.cpp": b}, task)
        run("g1_declared_prefix", kind, ws, cfg,
            deserved="-1 for prefix (reads 1/4 of the moving data, round 3's estimator); honest: its own")
    shutdown()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "all")
