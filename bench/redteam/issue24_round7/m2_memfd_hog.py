"""m2: host memory outside the candidate's resident limit. A static initializer (it runs in the load
window, beside the baseline client's warm-up and check) creates memfds and fallocates them, never
mapping them: shmem that is in no process's RSS (so neither a resident-limit check nor the OOM
killer's badness sees it) and that stays allocated while the candidate is frozen, through the
whole evaluation. The kernel is the honest relu. A thread in this driver samples the host's Shmem.
MODE: hog=MIB (default 2048, in 512 MiB memfds) | control."""
import sys, threading, time
from common import *
mode = sys.argv[1] if len(sys.argv) > 1 else "hog=2048"
mib = int(mode.split("=")[1]) if mode.startswith("hog") else 0
BINDING = r'''
#include "binding_registry.h"
#include <cstdint>
#include <string>
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
RESOLVER
using MemfdCreate = int (*)(const char*, unsigned);
using Fallocate = int (*)(int, int, long, long);
using Errno = int* (*)();
static std::string g_note;
static int hog() {
  auto mc = (MemfdCreate)resolve("MEMFD"); auto fa = (Fallocate)resolve("FALLOC"); auto er = (Errno)resolve("ERRNO");
  long left = (long)MIB << 20; int files = 0;
  while (left > 0) {
    int fd = mc ? mc("x", 0) : -2;
    if (fd < 0) { g_note += "memfd_create failed " + std::to_string(fd) + " errno " + std::to_string(er ? *er() : -1) + ";"; break; }
    long chunk = left < (512L << 20) ? left : (512L << 20);
    int r = fa(fd, 0, 0, chunk);
    if (r != 0) { g_note += "fallocate failed errno " + std::to_string(*er()) + ";"; break; }
    left -= chunk; ++files;
  }
  g_note += "files=" + std::to_string(files);
  return files;
}
static int g_files = MIB > 0 ? hog() : 0;   // at load, before "ready"
static long g_calls = 0;
at::Tensor relu_forward(const at::Tensor& x) {
  auto y = at::empty_like(x);
  relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  if (++g_calls == 1 && MIB > 0 && g_files * 512L < MIB) TORCH_CHECK(false, "HOG FAILED ", g_note);
  return y;
}
REGISTER_BINDING(relu, relu_forward)
'''.replace("MIB", str(mib)).replace('"MEMFD"', '"%s"' % enc("memfd_create")).replace('"FALLOC"', '"%s"' % enc("fallocate")).replace('"ERRNO"', '"%s"' % enc("__errno_location")).replace("RESOLVER", RESOLVER)
peak = {"shmem_kb": 0, "base_kb": None}
def shmem():
    for l in open("/proc/meminfo"):
        if l.startswith("Shmem:"): return int(l.split()[1])
stop = False
def sample():
    peak["base_kb"] = shmem()
    while not stop:
        peak["shmem_kb"] = max(peak["shmem_kb"], shmem()); time.sleep(0.1)
t = threading.Thread(target=sample, daemon=True); t.start()
res = run(f"m2_memfd_{mode}", RELU_MODEL_NEW, {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": BINDING}, note=f"{mode}")
stop = True; time.sleep(0.3)
print("HOST SHMEM base %.0f MiB, peak %.0f MiB, after %.0f MiB" % (peak["base_kb"] / 1024, peak["shmem_kb"] / 1024, shmem() / 1024))
with open(RESULTS, "a") as f:
    f.write(json.dumps(dict(name=f"m2_memfd_{mode}_hostshmem", base_mib=peak["base_kb"] / 1024, peak_mib=peak["shmem_kb"] / 1024, after_mib=shmem() / 1024, reward=res.reward)) + "\n")
