"""m3: memory taken and given back between looks. The look runs at a freeze (at most every 0.25 s) and on
an answer 0.25 s late; a candidate answering within 0.25 s is looked at only while stopped. Here
memory_limit_gb=1: the candidate holds 450 MiB of heap (with torch ~0.75 GiB: under the limit at every look),
and after verification, at most every 100 ms, one call fallocates a 700 MiB memfd and closes it before it
returns (~0.2 s): the process peaks ~1.45 GiB. MODE: attack | control (the same heap, no memfd)."""
import sys, threading, time
from common import *
mode = sys.argv[1] if len(sys.argv) > 1 else "attack"
BINDING = r'''
#include "binding_registry.h"
#include <cstdint>
#include <cstring>
#include <vector>
#include <chrono>
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
RESOLVER
using MemfdCreate = int (*)(const char*, unsigned); using Fallocate = int (*)(int, int, long, long); using Close = int (*)(int);
static std::vector<at::Tensor> g_keep; static long g_calls = 0, g_takes = 0;
static int at_load() { auto t = at::empty({450L << 20}, at::kByte); memset(t.data_ptr(), 1, 450L << 20); g_keep.push_back(t); return 1; }
static int g_loaded = at_load();
at::Tensor relu_forward(const at::Tensor& x) {
  auto y = at::empty_like(x);
  relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  static auto last = std::chrono::steady_clock::now();
  auto now = std::chrono::steady_clock::now();
  if (MODE == 1 && ++g_calls >= 8 && now - last > std::chrono::milliseconds(100)) {
    auto mc = (MemfdCreate)resolve("MEMFD"); auto fa = (Fallocate)resolve("FALLOC"); auto cl = (Close)resolve("CLOSE");
    int fd = mc("t", 0); if (fd >= 0) { if (fa(fd, 0, 0, 700L << 20) == 0) ++g_takes; cl(fd); }
    last = std::chrono::steady_clock::now();
  }
  return y;
}
REGISTER_BINDING(relu, relu_forward)
'''.replace("RESOLVER", RESOLVER).replace("MODE", str({"control": 0, "attack": 1}[mode]))
for k, v in {"MEMFD": "memfd_create", "FALLOC": "fallocate", "CLOSE": "close"}.items():
    BINDING = BINDING.replace('"%s"' % k, '"%s"' % enc(v))
peak = dict(shmem=0.0, n=0); stop = False
def sample():
    while not stop:
        s = meminfo("Shmem"); peak["shmem"] = max(peak["shmem"], s); peak["n"] += s > base + 500; time.sleep(0.01)
base = meminfo("Shmem")
th = threading.Thread(target=sample, daemon=True); th.start()
res = run(f"m3_between_looks_{mode}", RELU_MODEL_NEW, {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": BINDING},
          note=f"{mode}: 450 MiB heap + 700 MiB memfd taken and closed inside calls, limit 1 GiB", memory_limit_gb=1.0)
stop = True; time.sleep(0.3)
res2 = run(f"m3_between_looks_{mode}_then_honest", RELU_MODEL_NEW, {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": RELU_BINDING},
           note="honest relu right after, same judge", memory_limit_gb=1.0)
record(name=f"m3_{mode}_summary", reward=res.reward, reason=(res.reason or "")[:400], host_shmem_base_mib=round(base),
       host_shmem_peak_mib=round(peak["shmem"]), samples_over_base_plus_500mib=peak["n"],
       next_reward=res2.reward, next_reason=(res2.reason or "")[:200])
