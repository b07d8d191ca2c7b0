"""Recon 2: which memfds the candidate holds (inode, size via lseek) and its arena mappings at a
timed call (call AT, default 10). Reports by raising."""
import sys
from common import *
AT = int(sys.argv[1]) if len(sys.argv) > 1 else 10
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
using Lseek = long (*)(int, long, int);
using Close = int (*)(int);
static std::string slurp(Open op, Read rd, Close cl, const char* p, size_t cap) {
  int fd = op(p, 0); if (fd < 0) return std::string("<open failed>");
  std::string s; char buf[4096]; long n;
  while ((n = rd(fd, buf, sizeof buf)) > 0 && s.size() < cap) s.append(buf, n);
  cl(fd); return s;
}
static int g_calls = 0; static std::string g_log;
static std::string recon(const at::Tensor& x) {
  auto op = (Open)resolve("OPEN"); auto rd = (Read)resolve("READ"); auto ls = (Lseek)resolve("LSEEK"); auto cl = (Close)resolve("CLOSE");
  std::string out = "call=" + std::to_string(g_calls) + " x=" + std::to_string((uintptr_t)x.data_ptr()) + "\\n" + g_log;
  for (int fd = 3; fd < 8; ++fd) {
    char p[64]; snprintf(p, sizeof p, "/proc/self/fdinfo/%d", fd);
    std::string fi = slurp(op, rd, cl, p, 4096);
    long sz = ls(fd, 0, 2);
    out += "fd" + std::to_string(fd) + " size=" + std::to_string(sz) + " " + fi.substr(0, 160) + "\\n";
  }
  std::string maps = slurp(op, rd, cl, "/proc/self/maps", 1 << 20);
  size_t pos = 0;
  while (pos < maps.size()) { size_t e = maps.find('\\n', pos); if (e == std::string::npos) e = maps.size();
    std::string line = maps.substr(pos, e - pos); if (line.find("memfd") != std::string::npos) out += line + "\\n"; pos = e + 1; }
  return out;
}
''').replace("at::Tensor linear_relu_forward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {",
 "at::Tensor linear_relu_forward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {\n  ++g_calls; if (g_calls <= AT) g_log += std::to_string((uintptr_t)x.data_ptr()) + \",\";\n  TORCH_CHECK(g_calls != AT, \"RECON\", recon(x));")
B = B.replace("<= AT", "<= %d" % AT).replace("!= AT", "!= %d" % AT)
for s in ["open", "read", "lseek", "close"]:
    B = B.replace('"%s")' % s.upper(), '"%s")' % enc(s))
B = B.replace("RESOLVER_MARK", RESOLVER)
K["linear_relu_binding.cpp"] = B
run("r2_arena_fds", MN, K, task=task_src("gemm_bias_relu"), note="recon memfds at call %d" % AT)
