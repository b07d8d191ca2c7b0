"""v1: trials over 256 MiB are no longer held by the judge but made again from their seeds when
used. Are the checks that need the trial's values still made? relu on randn(16384, 4608) (288 MiB in).
MODE: zero_after (compute the output, then zero the input slot, on verification calls only) |
scale_after (multiply the input slot by 1.001 after computing: a small change) | honest."""
import sys
from common import *
mode = sys.argv[1] if len(sys.argv) > 1 else "zero_after"
TASK = '''
import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)
def get_inputs():
    return [torch.randn(16384, 4608)]
def get_init_inputs():
    return []
'''
BINDING = r'''
#include "binding_registry.h"
#include <cstdint>
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
static long g_calls = 0;
at::Tensor relu_forward(const at::Tensor& x) {
  ++g_calls;
  auto y = at::empty_like(x);
  relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  float* p = (float*)x.data_ptr<float>();
  if (MODE == 1 && g_calls <= 6) for (int64_t i = 0; i < x.numel(); ++i) p[i] = 0.f;
  if (MODE == 2 && g_calls <= 6) for (int64_t i = 0; i < x.numel(); ++i) p[i] *= 1.001f;
  return y;
}
REGISTER_BINDING(relu, relu_forward)
'''.replace("MODE", {"honest": "0", "zero_after": "1", "scale_after": "2"}[mode])
run(f"v1_big_trial_{mode}", RELU_MODEL_NEW.replace("x.contiguous()", "x"), {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": BINDING}, task=TASK, note=mode)
