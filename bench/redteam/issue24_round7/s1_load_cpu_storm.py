"""s1: CPU before "ready" is charged to nobody. A static initializer starts N spinning threads
(pthread_create resolved at run time) and holds the load for SECS seconds (the load stage allows 180);
the threads end before the library finishes loading, so the candidate is never seen running while
frozen. The kernel is the honest relu. On a host shared by several evaluations this is N cores of
interference with their timed rounds (the docs' "known limit": a busy host gave the reference
itself reward 2 at 10.85x), for no cost to this candidate. The driver records the host's CPU seconds
(/proc/stat) over the evaluation. MODE: storm=N,SECS | control."""
import sys, threading, time
from common import *
mode = sys.argv[1] if len(sys.argv) > 1 else "storm=8,20"
n, secs = (map(int, mode.split("=")[1].split(","))) if mode.startswith("storm") else (0, 0)
BINDING = r'''
#include "binding_registry.h"
#include <cstdint>
#include <ctime>
#include <atomic>
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
RESOLVER
using PthreadCreate = int (*)(void*, const void*, void* (*)(void*), void*);
using PthreadJoin = int (*)(unsigned long, void**);
using ClockGettime = int (*)(int, struct timespec*);
static ClockGettime g_cg;
static inline int64_t now_ns() { struct timespec t; g_cg(1, &t); return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec; }
static int64_t g_until;
static void* spin(void*) { volatile double a = 0; while (now_ns() < g_until) for (int i = 0; i < 100000; ++i) a = a + 1.0; return nullptr; }
static int storm() {
  g_cg = (ClockGettime)resolve("CG"); auto pc = (PthreadCreate)resolve("PC"); auto pj = (PthreadJoin)resolve("PJ");
  g_until = now_ns() + (int64_t)SECS * 1000000000;
  unsigned long tids[256];
  for (int i = 0; i < NTH; ++i) pc(&tids[i], nullptr, spin, nullptr);
  for (int i = 0; i < NTH; ++i) pj(tids[i], nullptr);
  return NTH;
}
static int g_started = NTH > 0 ? storm() : 0;
at::Tensor relu_forward(const at::Tensor& x) {
  auto y = at::empty_like(x);
  relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}
REGISTER_BINDING(relu, relu_forward)
'''.replace("NTH", str(n)).replace("SECS", str(secs)).replace("RESOLVER", RESOLVER)
for k, v in {"CG": "clock_gettime", "PC": "pthread_create", "PJ": "pthread_join"}.items():
    BINDING = BINDING.replace('"%s"' % k, '"%s"' % enc(v))
def cpu_s():
    f = open("/proc/stat").readline().split()[1:]
    return (sum(map(int, f[:3])) + int(f[5]) + int(f[6])) / os.sysconf("SC_CLK_TCK")
c0, t0 = cpu_s(), time.time()
res = run(f"s1_load_cpu_storm_{mode}", RELU_MODEL_NEW, {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": BINDING}, note=mode)
c1, t1 = cpu_s(), time.time()
print("HOST CPU-seconds busy during the evaluation: %.1f over %.1f s wall (2 cores)" % (c1 - c0, t1 - t0))
with open(RESULTS, "a") as f:
    f.write(json.dumps(dict(name=f"s1_load_cpu_storm_{mode}_host", host_busy_cpu_s=round(c1 - c0, 1), wall_s=round(t1 - t0, 1), reward=res.reward)) + "\n")
