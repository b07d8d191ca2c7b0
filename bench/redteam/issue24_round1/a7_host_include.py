"""Classes 3 / host files: does a build error show the bytes of a host file?
Variants: absolute include (static off), a macro-computed include (static on),
a venv file (a toolchain dir, readable to the compiler by design), the repo's docs."""
import sys
from common import *
def kern(inc):
    return inc + "\n" + RELU_KERNEL
cases = {
  "etc_off": ('#include "/etc/hostname"', False),
  "docs_off": ('#include "/work/main/docs/guards.md"', False),
  "venvcfg_off": ('#include "/work/main/.venv/pyvenv.cfg"', False),
  "macro_on": ('#define STR2(x) #x\n#define STR(x) STR2(x)\n#define P STR(/work/main/.venv/pyvenv.cfg)\n#include P', True),
  "venvcfg_on": ('#include "/work/main/.venv/pyvenv.cfg"', True),
}
for name in (sys.argv[1:] or cases):
    inc, static = cases[name]
    res = run(f"a7_{name}", RELU_MODEL_NEW, {"relu.cpp": kern(inc), "relu_binding.cpp": RELU_BINDING}, static=static)
    print("REASON", name, repr(res.reason[:1500]))
