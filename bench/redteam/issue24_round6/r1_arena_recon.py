"""Recon (every guard on): the candidate's fds, their open flags and seals, the arena mappings'
permissions, whether the weights live in the arena, whether /proc/self/fd/N reopens O_RDWR,
scratch's mount, the cpu mask. Reports by raising on the first call."""
import sys
from common import *
MN, K = example_files("gemm_bias_relu")
B = K["linear_relu_binding.cpp"]
B = B.replace('#include "binding_registry.h"', '''#include "binding_registry.h"
#include <cstdint>
#include <cstring>
#include <string>
#include <cstdio>
RESOLVER_MARK
using Open = int (*)(const char*, int, ...);
using Read = long (*)(int, void*, unsigned long);
using Fcntl = int (*)(int, int, ...);
using Readlink = long (*)(const char*, char*, unsigned long);
using Close = int (*)(int);
static std::string slurp(Open op, Read rd, Close cl, const char* p, size_t cap) {
  int fd = op(p, 0); if (fd < 0) return std::string("<open failed>");
  std::string s; char buf[4096]; long n;
  while ((n = rd(fd, buf, sizeof buf)) > 0 && s.size() < cap) s.append(buf, n);
  cl(fd); return s;
}
static std::string recon(const at::Tensor& x, const at::Tensor& w) {
  auto op = (Open)resolve("OPEN"); auto rd = (Read)resolve("READ"); auto fc = (Fcntl)resolve("FCNTL");
  auto rl = (Readlink)resolve("READLINK"); auto cl = (Close)resolve("CLOSE");
  std::string out = "x=" + std::to_string((uintptr_t)x.data_ptr()) + " w=" + std::to_string((uintptr_t)w.data_ptr()) + "\\n";
  for (int fd = 0; fd < 24; ++fd) {
    char p[64], l[256] = {0}; snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
    long n = rl(p, l, 255); if (n < 0) continue;
    int fl = fc(fd, 3); int seals = fc(fd, 1034);
    int r = op(p, 2); int e = r; if (r >= 0) cl(r);
    out += std::to_string(fd) + " " + l + " fl=" + std::to_string(fl) + " seals=" + std::to_string(seals) + " reopenRW=" + std::to_string(e) + "\\n";
  }
  std::string maps = slurp(op, rd, cl, "/proc/self/maps", 1 << 20);
  size_t pos = 0;
  while (pos < maps.size()) { size_t e = maps.find('\\n', pos); if (e == std::string::npos) e = maps.size();
    std::string line = maps.substr(pos, e - pos); if (line.find("memfd") != std::string::npos || line.find("scratch") != std::string::npos) out += line + "\\n"; pos = e + 1; }
  std::string st = slurp(op, rd, cl, "/proc/self/status", 1 << 16);
  size_t c = st.find("Cpus_allowed_list"); if (c != std::string::npos) out += st.substr(c, 40) + "\\n";
  std::string mi = slurp(op, rd, cl, "/proc/self/mountinfo", 1 << 16); out += "mountinfo:" + mi.substr(0, 1500);
  return out;
}
''').replace("at::Tensor linear_relu_forward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {",
 "at::Tensor linear_relu_forward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {\n  TORCH_CHECK(false, \"RECON\", recon(x, weight));")
for s in ["open", "read", "fcntl", "readlink", "close"]:
    B = B.replace('"%s")' % s.upper(), '"%s")' % enc(s))
B = B.replace("RESOLVER_MARK", RESOLVER)
K["linear_relu_binding.cpp"] = B
run("r1_arena_recon", MN, K, task=task_src("gemm_bias_relu"), note="recon fds/seals/maps")
