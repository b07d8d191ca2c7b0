"""d1: a scratch tree nested deeper than Python's recursion limit. At the end of the evaluation the judge
removes the candidate's scratch in `Judge.retire` with shutil.rmtree (Python 3.11: recursive
_rmtree_safe_fd, one frame per level); `ignore_errors=True` swallows OSError only, so a RecursionError
escapes retire(), evaluate()'s `finally`, and the judge answers "fault" (infrastructure) instead of the
verdict. The kernel is WRONG (relu + 1): −1 is the only right verdict.
MODE: deep=N (N nested dirs made by a static initializer, via libc resolved at run time) | control.
Then a second, honest evaluation in the same (warm) judge shows what the first left behind."""
import sys, time
from common import *
mode = sys.argv[1] if len(sys.argv) > 1 else "deep=3000"
depth = int(mode.split("=")[1]) if mode.startswith("deep") else 0
wrong = "honest" not in sys.argv[2:]
BINDING = r'''
#include "binding_registry.h"
#include <cstdint>
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
RESOLVER
using Getenv = char* (*)(const char*); using Chdir = int (*)(const char*); using Mkdir = int (*)(const char*, unsigned);
static int g_made = 0;
static int dig() {
  auto p_getenv = (Getenv)resolve("GETENV_"); auto p_chdir = (Chdir)resolve("CHDIR_"); auto p_mkdir = (Mkdir)resolve("MKDIR_");
  char home[8] = {'H','O','M','E',0};
  const char* h = p_getenv(home);
  if (!h || p_chdir(h) != 0) return -1;
  char d[2] = {'d', 0};
  for (int i = 0; i < DEPTH; ++i) { if (p_mkdir(d, 0700) != 0 || p_chdir(d) != 0) break; ++g_made; }
  return g_made;
}
static int g_done = DEPTH > 0 ? dig() : 0;
at::Tensor relu_forward(const at::Tensor& x) {
  auto y = at::empty_like(x);
  relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  if (WRONG) { float* p = y.data_ptr<float>(); for (int64_t i = 0; i < x.numel(); ++i) p[i] += 1.0f; }  // wrong on purpose
  return y;
}
REGISTER_BINDING(relu, relu_forward)
'''.replace("DEPTH", str(depth)).replace("WRONG", "1" if wrong else "0").replace("RESOLVER", RESOLVER)
for k, v in {"GETENV_": "getenv", "CHDIR_": "chdir", "MKDIR_": "mkdir"}.items():
    BINDING = BINDING.replace('"%s"' % k, '"%s"' % enc(v))
before = leftovers()
tag = f"d1_deep_scratch_{mode}{'' if wrong else '_honest'}"
res = run(tag, RELU_MODEL_NEW, {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": BINDING},
          note=f"static initializer makes {depth} nested dirs in scratch; kernel {'wrong (relu+1)' if wrong else 'honest'}")
after1 = leftovers()
# the next evaluation in the same judge: an honest relu
res2 = run(tag + "_then_honest", RELU_MODEL_NEW, {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": RELU_BINDING},
           note="honest relu right after, same judge")
time.sleep(1)
after2 = leftovers()
record(name=tag + "_summary", reward=res.reward, stage=res.model_dump(mode="json").get("stage"), reason=(res.reason or "")[:600],
       next_reward=res2.reward, next_reason=(res2.reason or "")[:300], before=before, after_first=after1, after_second=after2)
