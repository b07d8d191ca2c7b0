"""w1: (a) are warm-up calls read? skip the work on calls 7..6+W (after the 6 verification calls);
(b) are timed calls held to the full check? one element off by +1 on every call after the 6th.
MODE: honest | skipwarm=W | onebad | lastcalls (skip work on every call after call N=arg2)."""
import sys
from common import *
mode = sys.argv[1] if len(sys.argv) > 1 else "honest"
W = int(mode.split("=")[1]) if "=" in mode else 0
BINDING = r'''
#include "binding_registry.h"
#include <cstdint>
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
static long g_calls = 0;
at::Tensor relu_forward(const at::Tensor& x) {
  auto y = at::empty_like(x);
  ++g_calls;
  if (MODE == 1 && g_calls > 6 && g_calls <= 6 + W) return y;   // warm-up: no work
  relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  if (MODE == 2 && g_calls > 6) y.data_ptr<float>()[x.numel() - 1] += 1.0f;
  return y;
}
REGISTER_BINDING(relu, relu_forward)
'''.replace("MODE", {"honest": "0", "skipwarm": "1", "onebad": "2"}[mode.split("=")[0]]).replace("W", str(W))
run(f"w1_{mode}", RELU_MODEL_NEW, {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": BINDING}, note=mode)
