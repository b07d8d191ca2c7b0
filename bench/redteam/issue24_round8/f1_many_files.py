"""f1: many files in scratch. `Judge.retire` removes the candidate's scratch with shutil.rmtree inside
evaluate()'s `finally`, in the judge process (one per device, shared by every evaluation on it): the
candidate decides how long the judge spends there, and scratch is on the host's disk (inodes). The
kernel is WRONG (relu+1), so the evaluation ends at verification. MODE: files=N | control.
Reports the judge's `close` phase and the evaluation's wall time."""
import sys, time
from common import *
mode = sys.argv[1] if len(sys.argv) > 1 else "files=100000"
n = int(mode.split("=")[1]) if mode.startswith("files") else 0
BINDING = r'''
#include "binding_registry.h"
#include <cstdint>
#include <string>
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
RESOLVER
using Getenv = char* (*)(const char*); using Chdir = int (*)(const char*); using Open = int (*)(const char*, int, ...);
using Close = int (*)(int);
static int g_made = 0;
static int make() {
  auto p_getenv = (Getenv)resolve("GETENV_"); auto p_chdir = (Chdir)resolve("CHDIR_"); auto p_open = (Open)resolve("OPEN_");
  auto p_close = (Close)resolve("CLOSE_");
  char home[5] = {'H','O','M','E',0}; const char* h = p_getenv(home); if (!h || p_chdir(h)) return -1;
  char name[32];
  for (int i = 0; i < NFILES; ++i) { int k = i, j = 0; name[j++] = 'f'; do { name[j++] = '0' + k % 10; k /= 10; } while (k); name[j] = 0;
    int fd = p_open(name, 0100 | 01, 0600); if (fd < 0) break; p_close(fd); ++g_made; }
  return g_made;
}
static int g_done = NFILES > 0 ? make() : 0;
at::Tensor relu_forward(const at::Tensor& x) {
  auto y = at::empty_like(x);
  relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  float* p = y.data_ptr<float>(); for (int64_t i = 0; i < x.numel(); ++i) p[i] += 1.0f;
  return y;
}
REGISTER_BINDING(relu, relu_forward)
'''.replace("NFILES", str(n)).replace("RESOLVER", RESOLVER)
for k, v in {"GETENV_": "getenv", "CHDIR_": "chdir", "OPEN_": "open", "CLOSE_": "close"}.items():
    BINDING = BINDING.replace('"%s"' % k, '"%s"' % enc(v))
t0 = time.time()
res = run(f"f1_many_files_{mode}", RELU_MODEL_NEW, {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": BINDING}, note=mode)
d = res.model_dump(mode="json")
record(name=f"f1_many_files_{mode}_summary", reward=res.reward, reason=(res.reason or "")[:200], wall_s=round(time.time() - t0, 1),
       phases={k: round(v, 3) for k, v in (d.get("phases") or {}).items()})
