"""m2: host memory outside every count the watch makes. A root candidate keeps CAP_SYS_RESOURCE, so
fcntl(F_SETPIPE_SZ) raises a pipe past /proc/sys/fs/pipe-max-size (1 MiB); data written into a pipe
nobody reads is kernel memory: in no process's resident set, no memory file, no RLIMIT_AS.
memory_limit_gb=1; the static initializer fills pipes with GIB GiB and sleeps 1 s so the watch looks
(the m1 `load` control with memfds is -1 "out of memory" that way); the kernel is honest relu.
MODE: hog=GIB (default 3) | none (control)."""
import sys, threading, time
from common import *
mode = sys.argv[1] if len(sys.argv) > 1 else "hog=3"
gib = int(mode.split("=")[1]) if mode.startswith("hog") else 0
BINDING = r'''
#include "binding_registry.h"
#include <cstdint>
#include <cstring>
#include <string>
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
RESOLVER
using Pipe2 = int (*)(int*, int); using Fcntl = int (*)(int, int, ...); using Write = long (*)(int, const void*, unsigned long);
using Usleep = int (*)(unsigned); using Errno = int* (*)();
static char g_buf[1 << 20];
static std::string g_note;
static long g_held = 0;
static int hog() {
  if (GIB == 0) return 0;
  auto p2 = (Pipe2)resolve("PIPE2"); auto fc = (Fcntl)resolve("FCNTL"); auto wr = (Write)resolve("WRITE");
  auto us = (Usleep)resolve("USLEEP"); auto er = (Errno)resolve("ERRNO");
  memset(g_buf, 7, sizeof g_buf);
  const long per = 256L << 20;
  while (g_held < ((long)GIB << 30)) {
    int fds[2]; if (p2(fds, 0) != 0) { g_note += "pipe2 errno " + std::to_string(*er()); break; }
    int got = fc(fds[1], 1031 /* F_SETPIPE_SZ */, (int)per);
    if (got < per) { g_note += "F_SETPIPE_SZ " + std::to_string(got) + " errno " + std::to_string(*er()); break; }
    for (long w = 0; w < per; w += sizeof g_buf) { if (wr(fds[1], g_buf, sizeof g_buf) != (long)sizeof g_buf) break; g_held += sizeof g_buf; }
  }
  for (int i = 0; i < 10; ++i) us(100000);   // the watch looks meanwhile (a load of 1 s)
  return 1;
}
static int g_done = hog();
at::Tensor relu_forward(const at::Tensor& x) {
  auto y = at::empty_like(x);
  relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  if (GIB > 0 && g_held < ((long)GIB << 30)) TORCH_CHECK(false, "HOG FAILED held=", g_held, " ", g_note);
  return y;
}
REGISTER_BINDING(relu, relu_forward)
'''.replace("RESOLVER", RESOLVER).replace("GIB", str(gib))
for k, v in {"PIPE2": "pipe2", "FCNTL": "fcntl", "WRITE": "write", "USLEEP": "usleep", "ERRNO": "__errno_location"}.items():
    BINDING = BINDING.replace('"%s"' % k, '"%s"' % enc(v))
def avail_mib():
    for l in open("/proc/meminfo"):
        if l.startswith("MemAvailable:"):
            return int(l.split()[1]) / 1024
low = dict(avail=1e12); stop = False
def sample():
    while not stop:
        low["avail"] = min(low["avail"], avail_mib()); time.sleep(0.1)
base = avail_mib()
th = threading.Thread(target=sample, daemon=True); th.start()
res = run(f"m2_pipe_hog_{mode}", RELU_MODEL_NEW, {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": BINDING},
          note=f"{mode}: pipes past pipe-max-size against memory_limit_gb=1", memory_limit_gb=1.0)
stop = True; time.sleep(1.0)
after = avail_mib()
res2 = run(f"m2_pipe_hog_{mode}_then_honest", RELU_MODEL_NEW, {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": RELU_BINDING},
           note="honest relu right after, same judge", memory_limit_gb=1.0)
record(name=f"m2_{mode}_summary", reward=res.reward, reason=(res.reason or "")[:400], host_avail_base_mib=round(base),
       host_avail_drop_peak_mib=round(base - low["avail"]), host_avail_drop_after_mib=round(base - after),
       next_reward=res2.reward, next_reason=(res2.reason or "")[:200])
