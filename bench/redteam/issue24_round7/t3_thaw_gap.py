"""t3: how long does the candidate run between being thawed (SIGCONT) and its first call of a batch?
A SIGCONT handler (sigaction resolved at run time) notes the time of each thaw; forward() notes the
first call after each. After WAKES thaws the binding raises with the gaps (us) — recon, −1 expected.
If the gaps are long, a handler that computes the batch there would work outside the interval."""
import sys
from common import *
wakes = int(sys.argv[1]) if len(sys.argv) > 1 else 40
report_at = int(sys.argv[2]) if len(sys.argv) > 2 else -1
BINDING = r'''
#include "binding_registry.h"
#include <cstdint>
#include <string>
#include <cstring>
#include <atomic>
#include <ctime>
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
RESOLVER
struct KSigaction { void (*handler)(int); unsigned long mask[16]; int flags; void (*restorer)(); };  // glibc's layout
using Sigaction = int (*)(int, const KSigaction*, KSigaction*);
using ClockGettime = int (*)(int, struct timespec*);
static ClockGettime g_cg;
static inline int64_t now_ns() { struct timespec t; g_cg(1, &t); return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec; }
static std::atomic<int64_t> g_wake{0}; static std::atomic<int> g_nwakes{0};
static void on_cont(int) { g_wake.store(now_ns()); g_nwakes.fetch_add(1); }
static int start() {
  g_cg = (ClockGettime)resolve("CG"); auto sa = (Sigaction)resolve("SA");
  KSigaction a; memset(&a, 0, sizeof a); a.handler = on_cont; a.flags = 0x10000000 /*SA_RESTART*/;
  return sa(18 /*SIGCONT*/, &a, nullptr);
}
static int g_started = start();
static int64_t g_seen_wake = 0; static std::string g_log; static long g_calls = 0;
at::Tensor relu_forward(const at::Tensor& x) {
  int64_t t = now_ns(); ++g_calls;
  int64_t w = g_wake.load();
  if (w != g_seen_wake) { g_seen_wake = w; g_log += std::to_string(g_calls) + ":" + std::to_string((t - w) / 1000) + " "; }
  if (g_nwakes.load() >= WAKES || g_calls == REPORT_AT) TORCH_CHECK(false, "GAPS(call:us) sa=", g_started, " wakes=", g_nwakes.load(), " calls=", g_calls, " ", g_log);
  auto y = at::empty_like(x);
  relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}
REGISTER_BINDING(relu, relu_forward)
'''.replace('"CG"', '"%s"' % enc("clock_gettime")).replace('"SA"', '"%s"' % enc("sigaction")).replace("WAKES", str(wakes)).replace("REPORT_AT", str(report_at)).replace("RESOLVER", RESOLVER)
res = run(f"t3_thaw_gap_{wakes}", RELU_MODEL_NEW, {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": BINDING}, note="gap between thaw (SIGCONT) and first call")
