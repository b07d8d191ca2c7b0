"""m1: memory past `memory_limit_gb`, taken where the watch never looks. The candidate's memory watch
(WatchedProcess._watch: resident + memory files) runs only from CandidateLink.receive when select() waits
0.25 s without an answer: a candidate whose every answer comes back within 0.25 s is never looked at
after load. Here memory_limit_gb=1; the kernel is honest relu, and from call 8 on (after verification)
a call takes 128 MiB more (at most one take per 100 ms, so no answer is slow) until it holds 2 GiB, kept to the end of the evaluation.
MODE: memfd (memfd_create + fallocate, kept open) | heap (at::empty + memset, kept in a static vector) |
load (control: the same 2 GiB of memfd at load, then 1 s of sleep: the watch sees it) | none (control)."""
import sys, threading, time
from common import *
mode = sys.argv[1] if len(sys.argv) > 1 else "memfd"
HOG = {"memfd": 1, "heap": 2, "load": 3, "none": 0}[mode]
BINDING = r'''
#include "binding_registry.h"
#include <cstdint>
#include <cstring>
#include <vector>
#include <chrono>
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
RESOLVER
using MemfdCreate = int (*)(const char*, unsigned); using Fallocate = int (*)(int, int, long, long); using Usleep = int (*)(unsigned);
static long g_held = 0, g_calls = 0;
static std::vector<at::Tensor> g_keep;
static const long TARGET = 2L << 30, STEP = 128L << 20;
static void take() {
  if (HOG == 2) { auto t = at::empty({STEP}, at::kByte); memset(t.data_ptr(), 1, STEP); g_keep.push_back(t); g_held += STEP; return; }
  auto mc = (MemfdCreate)resolve("MEMFD"); auto fa = (Fallocate)resolve("FALLOC");
  int fd = mc("h", 0); if (fd >= 0 && fa(fd, 0, 0, STEP) == 0) g_held += STEP;
}
static int at_load() {
  if (HOG != 3) return 0;
  while (g_held < TARGET) take();
  auto us = (Usleep)resolve("USLEEP"); for (int i = 0; i < 10; ++i) us(100000);
  return 1;
}
static int g_loaded = at_load();
at::Tensor relu_forward(const at::Tensor& x) {
  auto y = at::empty_like(x);
  relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  static auto last = std::chrono::steady_clock::now();
  auto now = std::chrono::steady_clock::now();   // at most one 128 MiB take per 100 ms: no answer waits 0.25 s
  if ((HOG == 1 || HOG == 2) && ++g_calls >= 8 && g_held < TARGET && now - last > std::chrono::milliseconds(100)) { take(); last = now; }
  return y;
}
REGISTER_BINDING(relu, relu_forward)
'''.replace("RESOLVER", RESOLVER).replace("HOG", str(HOG))
for k, v in {"MEMFD": "memfd_create", "FALLOC": "fallocate", "USLEEP": "usleep"}.items():
    BINDING = BINDING.replace('"%s"' % k, '"%s"' % enc(v))
def avail_mib():
    for l in open("/proc/meminfo"):
        if l.startswith("MemAvailable:"):
            return int(l.split()[1]) / 1024
peak = dict(shmem=0.0, avail_min=1e12); stop = False
def sample():
    while not stop:
        peak["shmem"] = max(peak["shmem"], shmem_mib()); peak["avail_min"] = min(peak["avail_min"], avail_mib()); time.sleep(0.1)
base = dict(shmem=shmem_mib(), avail=avail_mib())
th = threading.Thread(target=sample, daemon=True); th.start()
res = run(f"m1_mem_gap_{mode}", RELU_MODEL_NEW, {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": BINDING},
          note=f"{mode}: 2 GiB against memory_limit_gb=1", memory_limit_gb=1.0)
stop = True; time.sleep(0.3)
res2 = run(f"m1_mem_gap_{mode}_then_honest", RELU_MODEL_NEW, {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": RELU_BINDING},
           note="honest relu right after, same judge", memory_limit_gb=1.0)
record(name=f"m1_{mode}_summary", reward=res.reward, reason=(res.reason or "")[:400],
       host_shmem_base_mib=round(base["shmem"]), host_shmem_peak_mib=round(peak["shmem"]),
       host_avail_drop_mib=round(base["avail"] - peak["avail_min"]), next_reward=res2.reward, next_reason=(res2.reason or "")[:200])
