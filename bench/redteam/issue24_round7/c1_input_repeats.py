"""c1: do any inputs repeat after verification (the precondition of every output cache)? The binding
fingerprints each call's input (FNV over its bytes at 64 spread positions plus the first 64 elements)
and counts, among calls after the 6 verification calls, how many fingerprints were seen before —
separately for the warm-up (the first 2 batches) and the timed batches — then raises at call AT with
the counts (recon: −1 expected). Also counts exact repeats of the *base* pattern of signs."""
import sys
from common import *
at = int(sys.argv[1]) if len(sys.argv) > 1 else 1500
BINDING = r'''
#include "binding_registry.h"
#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_map>
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
static long g_calls = 0; static long g_rep = 0, g_sign_rep = 0, g_after = 0;
static std::unordered_map<uint64_t, long> g_seen, g_signs;
static std::string g_where;
at::Tensor relu_forward(const at::Tensor& x) {
  ++g_calls;
  const uint32_t* p = (const uint32_t*)x.data_ptr<float>(); int64_t n = x.numel();
  uint64_t h = 1469598103934665603ull, s = 1469598103934665603ull;
  for (int i = 0; i < 64; ++i) { uint32_t a = p[i], b = p[(n / 64) * i + 7]; h = (h ^ a) * 1099511628211ull; h = (h ^ b) * 1099511628211ull; s = (s ^ (a >> 31)) * 1099511628211ull; s = (s ^ (b >> 31)) * 1099511628211ull; }
  if (g_calls > 6) {
    ++g_after;
    auto it = g_seen.find(h); if (it != g_seen.end()) { ++g_rep; if (g_where.size() < 300) g_where += std::to_string(it->second) + "->" + std::to_string(g_calls) + " "; }
    if (g_signs.count(s)) ++g_sign_rep;
  }
  g_seen.emplace(h, g_calls); g_signs.emplace(s, g_calls);
  if (g_calls == AT) TORCH_CHECK(false, "REPEATS after=", g_after, " value_repeats=", g_rep, " sign_repeats=", g_sign_rep, " first: ", g_where);
  auto y = at::empty_like(x);
  relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}
REGISTER_BINDING(relu, relu_forward)
'''.replace("AT", str(at))
run(f"c1_input_repeats_{at}", RELU_MODEL_NEW, {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": BINDING}, note="do inputs repeat after verification")
