"""p1: what the loaded candidate can reach of targets (1) and (2), reported by raising (-1 deserved).
At load: its fds (readlink), its cgroups, its memory cgroup's peak; then tries: write 0 to
memory.max_usage_in_bytes (v1: resets the peak), memory.force_empty; flock(LOCK_EX) and fcntl F_SETLK/
F_OFD_SETLK read locks, F_SETSIG, F_GETLEASE, F_SETPIPE_SZ on every inherited fd and on readable files.
MODE: probe | control (honest relu)."""
import sys
from common import *
mode = sys.argv[1] if len(sys.argv) > 1 else "probe"
BINDING = r'''
#include "binding_registry.h"
#include <cstdint>
#include <cstring>
#include <string>
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
RESOLVER
using Open = int (*)(const char*, int, ...); using Fcntl = int (*)(int, int, ...); using Flock = int (*)(int, int);
using Read = long (*)(int, void*, unsigned long); using Write = long (*)(int, const void*, unsigned long);
using Errno = int* (*)(); using Readlink = long (*)(const char*, char*, unsigned long); using Close = int (*)(int);
static std::string g_note;
static Open op; static Fcntl fc; static Flock fl; static Read rd; static Write wr; static Errno er; static Readlink rl; static Close cl;
static void note(const std::string& what, long r) { g_note += what + "=" + std::to_string(r) + (r < 0 ? "/e" + std::to_string(*er()) : "") + "; "; }
static std::string slurp(const std::string& p) { int fd = op(p.c_str(), 0); if (fd < 0) return "ERR" + std::to_string(*er()); static char b[4096]; long n = rd(fd, b, sizeof b - 1); cl(fd); if (n < 0) return "RERR"; b[n] = 0; return std::string(b); }
struct Flk { short type, whence; long start, len; int pid; };
static int act() {
  if (MODE == 0) return 0;
  op = (Open)resolve("OPEN"); fc = (Fcntl)resolve("FCNTL"); fl = (Flock)resolve("FLOCK"); rd = (Read)resolve("READ");
  wr = (Write)resolve("WRITE"); er = (Errno)resolve("ERRNO"); rl = (Readlink)resolve("READLINK"); cl = (Close)resolve("CLOSE");
  for (int fd = 0; fd < 64; ++fd) {
    char p[64]; snprintf(p, sizeof p, "/proc/self/fd/%d", fd); char t[256]; long n = rl(p, t, 255); if (n < 0) continue; t[n] = 0;
    g_note += "fd" + std::to_string(fd) + "->" + t + " fl=" + std::to_string(fc(fd, 3)) + "; ";
  }
  std::string cg = slurp("/proc/self/cgroup"); g_note += "CG[" + cg + "] ";
  std::string mem; size_t i = cg.find(":memory:"); if (i != std::string::npos) { size_t e = cg.find('\n', i); mem = cg.substr(i + 8, e - i - 8); }
  std::string base = "/sys/fs/cgroup/memory" + mem + "/";
  g_note += "peak=" + slurp(base + "memory.max_usage_in_bytes") + " usage=" + slurp(base + "memory.usage_in_bytes");
  for (const char* f : {"memory.max_usage_in_bytes", "memory.force_empty", "memory.limit_in_bytes", "cgroup.procs"}) {
    int fd = op((base + f).c_str(), 1); note(std::string("wr_") + f, fd); if (fd >= 0) { note("write", wr(fd, "0", 1)); cl(fd); }
  }
  // locks on inherited fds and readable files
  for (int fd = 0; fd < 64; ++fd) {
    if (fc(fd, 1) < 0) continue;
    note("flockEX" + std::to_string(fd), fl(fd, 2 | 4));
    Flk k{0 /*F_RDLCK*/, 0, 0, 0, 0}; note("setlkRD" + std::to_string(fd), fc(fd, 6, &k));
    Flk w{1 /*F_WRLCK*/, 0, 0, 0, 0}; note("ofdWR" + std::to_string(fd), fc(fd, 37, &w));
    note("setsig" + std::to_string(fd), fc(fd, 10, 29)); note("getlease" + std::to_string(fd), fc(fd, 1025));
    note("setown" + std::to_string(fd), fc(fd, 8, 1));
  }
  for (const char* f : {"/usr/bin/env", "/etc/passwd", "/etc/ld.so.cache"}) { int fd = op(f, 0); note(std::string("flockEX_") + f, fd >= 0 ? fl(fd, 2 | 4) : -1); }
  return 1;
}
static int g_done = act();
at::Tensor relu_forward(const at::Tensor& x) {
  auto y = at::empty_like(x);
  relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  if (MODE == 1) TORCH_CHECK(false, "PROBE ", g_note);
  return y;
}
REGISTER_BINDING(relu, relu_forward)
'''.replace("RESOLVER", RESOLVER).replace("MODE", str({"control": 0, "probe": 1}[mode]))
for k, v in {"OPEN": "open", "FCNTL": "fcntl", "FLOCK": "flock", "READ": "read", "WRITE": "write", "ERRNO": "__errno_location",
             "READLINK": "readlink", "CLOSE": "close"}.items():
    BINDING = BINDING.replace('"%s"' % k, '"%s"' % enc(v))
res = run(f"p1_probe_{mode}", RELU_MODEL_NEW, {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": BINDING}, note=mode)
res2 = run(f"p1_probe_{mode}_then_honest", RELU_MODEL_NEW, {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": RELU_BINDING},
           note="honest relu right after, same judge")
record(name=f"p1_{mode}_summary", reward=res.reward, reason=(res.reason or "")[:3000], next_reward=res2.reward,
       next_reason=(res2.reason or "")[:200], leftovers=leftovers())
