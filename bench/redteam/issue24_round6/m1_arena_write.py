"""m1: the arena is mapped rw-s in the candidate (fds 3/4 O_RDWR, seals 7 = no F_SEAL_WRITE;
r1_arena_recon.py). Does the judge notice the candidate overwriting its input slot?
MODE: verify (zero x after an honest relu on call AT, default 1 = a verification call) |
timed (same on call AT=10, a timed call) | control (no write)."""
import sys
from common import *
mode = sys.argv[1] if len(sys.argv) > 1 else "verify"
at = {"verify": 1, "timed": 10, "control": -1}[mode]
BINDING = r'''
#include "binding_registry.h"
#include <cstdint>
#include <cstring>
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
static long g_calls = 0;
at::Tensor relu_forward(const at::Tensor& x) {
  auto y = at::empty_like(x);
  relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  if (++g_calls == AT) { float* p = (float*)x.data_ptr<float>(); for (int64_t i = 0; i < x.numel(); ++i) p[i] = 0.f; }
  return y;
}
REGISTER_BINDING(relu, relu_forward)
'''.replace("AT", str(at))
run(f"m1_arena_write_{mode}", RELU_MODEL_NEW.replace("x.contiguous()", "x"), {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": BINDING}, note=f"input slot zeroed on call {at}")
