"""Class 2 with every guard on: one output buffer reused on every call (a static tensor in the
binding) for a task whose output is over 256 MiB, where the judge holds no earlier batch.
Control: the honest binding allocating each call (RELU_BINDING)."""
import sys
from common import *
TASK = RELU_TASK.replace("torch.randn(64, 1024)", "torch.randn(1040, 65536)")
STATIC_BINDING = '''
#include "binding_registry.h"
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
at::Tensor relu_forward(const at::Tensor& x) {
  CHECK_CONTIGUOUS(x); CHECK_DTYPE(x, at::kFloat);
  static at::Tensor pool;
  if (!pool.defined() || pool.numel() != x.numel()) pool = at::empty_like(x);
  relu_kernel(x.data_ptr<float>(), pool.data_ptr<float>(), x.numel());
  return pool;
}
REGISTER_BINDING(relu, relu_forward)
'''
which = sys.argv[1:] or ["static", "honest"]
for w in which:
    b = STATIC_BINDING if w == "static" else RELU_BINDING
    run(f"a4_big_{w}", RELU_MODEL_NEW, {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": b}, task=TASK)
