"""f1: a (trusted) float task whose get_inputs changes shape with the seed: the docs say such a task
falls back to scaling the verification sets. Does it, and can a candidate see it? The binding
fingerprints each call's sign pattern (kept by the scaling) and counts repeats after verification,
by shape; raises at call AT with the counts (recon). TASK: relu on randn(64 + randint(0,2), 1024)."""
import sys
from common import *
at = int(sys.argv[1]) if len(sys.argv) > 1 else 1500
TASK = '''
import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)
def get_inputs():
    rows = 64 + int(torch.randint(0, 2, (1,)).item())
    return [torch.randn(rows, 1024)]
def get_init_inputs():
    return []
'''
BINDING = r'''
#include "binding_registry.h"
#include <cstdint>
#include <string>
#include <unordered_map>
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
static long g_calls = 0, g_after = 0, g_rep = 0, g_rows64 = 0, g_rows65 = 0;
static std::unordered_map<uint64_t, long> g_signs; static std::string g_first;
at::Tensor relu_forward(const at::Tensor& x) {
  ++g_calls;
  const uint32_t* p = (const uint32_t*)x.data_ptr<float>(); int64_t n = x.numel();
  uint64_t s = 1469598103934665603ull;
  for (int64_t i = 0; i < n; i += 97) s = (s ^ (p[i] >> 31)) * 1099511628211ull;
  if (g_calls > 6) { ++g_after; if (x.size(0) == 64) ++g_rows64; else ++g_rows65;
    auto it = g_signs.find(s); if (it != g_signs.end()) { ++g_rep; if (g_first.size() < 200) g_first += std::to_string(it->second) + "->" + std::to_string(g_calls) + " "; } }
  g_signs.emplace(s, g_calls);
  if (g_calls == STOPAT) TORCH_CHECK(false, "SHAPES after=", g_after, " rows64=", g_rows64, " rows65=", g_rows65, " sign_repeats=", g_rep, " distinct=", (long)g_signs.size(), " first: ", g_first);
  auto y = at::empty_like(x);
  relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}
REGISTER_BINDING(relu, relu_forward)
'''.replace("STOPAT", str(at))
run(f"f1_shape_fallback_{at}", RELU_MODEL_NEW.replace("x.contiguous()", "x"), {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": BINDING}, task=TASK, note="seed-dependent shape: fallback to scaled verification sets?")
