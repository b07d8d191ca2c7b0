"""w2: is calls-per-interval (m) chosen from the candidate's own warm-up, whose outputs are never
read (w1: 300 calls of no work after verification still got reward 1)? A relu that also burns
~SPIN_US of busy work per call (honest, slow), vs the same kernel doing no work at all on the
W calls after verification. MODE: honest | skipwarm=W ; spin=US (default 1000)."""
import sys
from common import *
mode = sys.argv[1] if len(sys.argv) > 1 else "honest"
spin = int(next((a.split("=")[1] for a in sys.argv[2:] if a.startswith("spin=")), "1000"))
W = int(mode.split("=")[1]) if "=" in mode else 0
KERNEL = r'''
#include <cstdint>
#include <chrono>
extern "C" void relu_kernel(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
  auto t0 = std::chrono::steady_clock::now();
  volatile float acc = 0.f;
  while (std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count() < SPIN) acc = acc + 1.f;
}
'''.replace("SPIN", str(spin))
BINDING = r'''
#include "binding_registry.h"
#include <cstdint>
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
static long g_calls = 0;
at::Tensor relu_forward(const at::Tensor& x) {
  auto y = at::empty_like(x);
  ++g_calls;
  if (g_calls > 6 && g_calls <= 6 + W) return y;   // warm-up: no work
  relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}
REGISTER_BINDING(relu, relu_forward)
'''.replace("W", str(W))
run(f"w2_{mode}_spin{spin}", RELU_MODEL_NEW, {"relu.cpp": KERNEL, "relu_binding.cpp": BINDING}, note=f"{mode} spin={spin}us")
