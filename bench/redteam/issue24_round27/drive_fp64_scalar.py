"""A task with a float64 one-element output: a wrong candidate answers 1e200.
The comparison squares a finite 1e200 norm in Python floats -> OverflowError inside compare_outputs."""
from drive_common import run, RELU_BINDING
TASK = '''
import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        return (x.double() * x.double()).sum()
def get_inputs():
    return [torch.randn(4096)]
def get_init_inputs():
    return []
'''
HONEST = '''
import torch
import torch.nn as nn
import cpu_extension
class ModelNew(nn.Module):
    def forward(self, x):
        return cpu_extension.sq(x.contiguous())
'''
KERNEL_T = '''
#include "binding_registry.h"
at::Tensor sq_forward(const at::Tensor& x) {
  CHECK_CONTIGUOUS(x); CHECK_DTYPE(x, at::kFloat);
  auto y = at::empty({}, x.options().dtype(at::kDouble));
  const float* p = x.data_ptr<float>(); double s = 0;
  for (int64_t i = 0; i < x.numel(); ++i) s += (double)p[i] * (double)p[i];
  y.data_ptr<double>()[0] = %s;
  return y;
}
REGISTER_BINDING(sq, sq_forward)
'''
import sys
which = sys.argv[1:] or ["honest", "huge"]
if "honest" in which:
    run("honest fp64 scalar", TASK, HONEST, {"sq_binding.cpp": KERNEL_T % "s"}, name="sq")
if "huge" in which:
    run("wrong: 1e200", TASK, HONEST, {"sq_binding.cpp": KERNEL_T % "1e200"}, name="sq")
if "wrong" in which:
    run("wrong: s+1e3 (control for a plain wrong answer)", TASK, HONEST, {"sq_binding.cpp": KERNEL_T % "s + 1e3"}, name="sq")
