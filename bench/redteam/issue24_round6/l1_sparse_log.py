"""l1: the candidate's log (fd 1/2, O_RDWR, a host /tmp file, read back as worker_log) made a 1 GiB
sparse file in one syscall (lseek to 1 GiB - 4 KiB, write a line): does the evaluator read it whole?
Also reports scratch's filesystem type (fstatfs of a file in $TMPDIR) into the log tail.
MODE: sparse | control (same line, no seek). The kernel is the honest relu."""
import sys
from common import *
mode = sys.argv[1] if len(sys.argv) > 1 else "sparse"
BINDING = r'''
#include "binding_registry.h"
#include <cstdint>
#include <cstring>
#include <string>
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
RESOLVER_MARK
using Lseek = long (*)(int, long, int);
using Write = long (*)(int, const void*, unsigned long);
using Getenv = char* (*)(const char*);
using Open = int (*)(const char*, int, ...);
using Fstatfs = int (*)(int, void*);
static long g_calls = 0;
at::Tensor relu_forward(const at::Tensor& x) {
  if (++g_calls == 1) {
    auto ls = (Lseek)resolve("LSEEK"); auto wr = (Write)resolve("WRITE"); auto ge = (Getenv)resolve("GETENV");
    auto op = (Open)resolve("OPEN"); auto fs = (Fstatfs)resolve("FSTATFS");
    std::string info = "\nRT6INFO tmpdir=";
    const char* t = ge("TMPDIR"); info += t ? t : "(none)";
    if (t) { std::string p = std::string(t) + "/probe"; int fd = op(p.c_str(), 0101 | 01000, 0600);
      uint64_t sf[16] = {0}; int r = fd >= 0 ? fs(fd, sf) : -9; info += " statfs=" + std::to_string(r) + " ftype=" + std::to_string(sf[0]) + " blocks=" + std::to_string(sf[2]) + " bavail=" + std::to_string(sf[4]); }
    info += "\n";
    if (SPARSE) ls(1, (1L << 30) - 4096, 0);
    wr(1, info.data(), info.size());
  }
  auto y = at::empty_like(x);
  relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}
REGISTER_BINDING(relu, relu_forward)
'''.replace("RESOLVER_MARK", RESOLVER).replace("SPARSE", "1" if mode == "sparse" else "0")
for s in ["lseek", "write", "getenv", "open", "fstatfs"]:
    BINDING = BINDING.replace('"%s")' % s.upper(), '"%s")' % enc(s))
import subprocess, os, json as _j, time as _t
samp = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "rss_sampler.py"), f"/tmp/redteam-r6/l1_{mode}_rss.json"])
try:
    res = run(f"l1_sparse_log_{mode}", RELU_MODEL_NEW, {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": BINDING}, note=f"candidate log {mode}")
finally:
    samp.terminate(); samp.wait()
print("RSS top (MiB):", open(f"/tmp/redteam-r6/l1_{mode}_rss.json").read())
with open(RESULTS, "a") as f:
    f.write(_j.dumps(dict(name=f"l1_sparse_log_{mode}_rss", rss_top_mib=_j.loads(open(f"/tmp/redteam-r6/l1_{mode}_rss.json").read()))) + "\n")
