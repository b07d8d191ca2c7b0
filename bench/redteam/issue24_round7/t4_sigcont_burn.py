"""t4: is the time between the judge's SIGCONT (thaw) and its command inside the timed interval?
A SIGCONT handler (sigaction resolved at run time) burns BURN_US of CPU on every thaw; the kernel is
the honest relu. If the candidate's per-call time grows by ~BURN_US/m the thaw is timed; if not, a
handler that computes the batch there (inputs are in place before the thaw) works for free.
MODE: burn=US | control."""
import sys
from common import *
mode = sys.argv[1] if len(sys.argv) > 1 else "burn=20000"
us = int(mode.split("=")[1]) if "=" in mode else 0
BINDING = r'''
#include "binding_registry.h"
#include <cstdint>
#include <cstring>
#include <ctime>
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
RESOLVER
struct GSigaction { void (*handler)(int); unsigned long mask[16]; int flags; void (*restorer)(); };
using Sigaction = int (*)(int, const GSigaction*, GSigaction*);
using ClockGettime = int (*)(int, struct timespec*);
static ClockGettime g_cg;
static inline int64_t now_ns() { struct timespec t; g_cg(1, &t); return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec; }
static long g_calls = 0;
static void on_cont(int) {
  if (g_calls < 7) return;             // verification untouched
  int64_t t0 = now_ns(); volatile double a = 0; while (now_ns() - t0 < (int64_t)BURN * 1000) a = a + 1.0;
}
static int start() {
  g_cg = (ClockGettime)resolve("CG"); auto sa = (Sigaction)resolve("SA");
  GSigaction a; memset(&a, 0, sizeof a); a.handler = on_cont; a.flags = 0x10000000;
  return BURN > 0 ? sa(18, &a, nullptr) : 0;
}
static int g_started = start();
at::Tensor relu_forward(const at::Tensor& x) {
  ++g_calls;
  auto y = at::empty_like(x);
  relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}
REGISTER_BINDING(relu, relu_forward)
'''.replace('"CG"', '"%s"' % enc("clock_gettime")).replace('"SA"', '"%s"' % enc("sigaction")).replace("BURN", str(us)).replace("RESOLVER", RESOLVER)
run(f"t4_sigcont_{mode}", RELU_MODEL_NEW, {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": BINDING}, note=f"SIGCONT handler burns {us} us per thaw")
