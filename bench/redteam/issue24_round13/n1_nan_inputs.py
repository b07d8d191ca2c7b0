"""n1: an honest kernel on a task whose inputs hold NaN gets -1 "input mutation while being timed".

The timed-round input check (`_CandidateSession.check_inputs_untouched`) compares the candidate's slots with
the round's values by `torch.equal`, which is False wherever both hold NaN (NaN != NaN); verification's own
check (`guards.inputs_changed`) uses `allclose(equal_nan=True)` and passes. So any task whose get_inputs()
yields NaN (a nan-masking / nan_to_num / nanmean task) fails every honest candidate at the first timed round.
Control: the same honest kernel on the same task without NaN in the inputs (reward 1).
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
    def forward(self, x):
        return torch.where(torch.isnan(x), torch.zeros_like(x), x)

def get_inputs():
    x = torch.randn(64, 1024)
    x[:, ::7] = float("nan")
    return [x]

def get_init_inputs():
    return []
'''
TASK_NO_NAN = TASK.replace('x[:, ::7] = float("nan")', 'x[:, ::7] = 0.0')

MODEL_NEW = '''
import torch.nn as nn
import cpu_extension

class ModelNew(nn.Module):
    def forward(self, x):
        return cpu_extension.nanzero(x.contiguous())
'''
BINDING = '''
#include "binding_registry.h"
extern "C" void nanzero_kernel(const float* x, float* y, int64_t n);
at::Tensor nanzero_forward(const at::Tensor& x) {
  CHECK_CONTIGUOUS(x); CHECK_DTYPE(x, at::kFloat);
  auto y = at::empty_like(x);
  nanzero_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}
REGISTER_BINDING(nanzero, nanzero_forward)
'''
KERNEL = '''
#include <cstdint>
extern "C" void nanzero_kernel(const float* x, float* y, int64_t n) {
  #pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] != x[i]) ? 0.f : x[i];
}
'''
FILES = {"nanzero.cpp": KERNEL, "nanzero_binding.cpp": BINDING}

if __name__ == "__main__":
    try:
        run("n1_nan_inputs", "honest kernel, inputs with NaN", workspace("n1_nan", MODEL_NEW, FILES, TASK),
            config(), deserved="1 (honest, correct)")
        run("n1_nan_inputs", "control: same kernel, no NaN", workspace("n1_ctrl", MODEL_NEW, FILES, TASK_NO_NAN),
            config(), deserved="1")
    finally:
        shutdown()
