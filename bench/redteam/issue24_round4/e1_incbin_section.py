"""Every guard on (static checks too). Embed host files into the library at *assemble* time through
a section-name attribute (`.INCBIN`, upper case: GAS directives are case-insensitive, the scan regex is not; first try with `.incbin` was refused as io-in-kernel), then return
the bytes at run time in a TORCH_CHECK message -> the reason. Reading its own .rodata needs no
I/O import, no syscall: nothing for the symbol check or the sandbox to see. Files: what the
confined assembler may read (system dirs, python / torch trees)."""
import sys
from common import *
FILES = sys.argv[1:] or ["/etc/hostname", "/etc/passwd", "/work/main/.venv/pyvenv.cfg", "/etc/resolv.conf"]
KERNEL_T = r'''
#include <cstdint>
#include <cstring>
#define LEAK(n, path) \
  __attribute__((used, section(".rodata.lk" #n "\n.globl lkd" #n "\nlkd" #n ":\n.INCBIN \"" path "\"\n.BYTE 0\n#"))) \
  const char lkpad##n[1] = {0};
@@DECLS@@
extern "C" const char* leak_text(int i) {
  switch (i) { @@CASES@@ default: return nullptr; }
}
extern "C" void relu_kernel(const float* x, float* y, int64_t n) {
  #pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
'''
decls = "\n".join(f'LEAK({i}, "{p}")\nextern "C" const char lkd{i}[];' for i, p in enumerate(FILES))
cases = " ".join(f"case {i}: return lkd{i};" for i in range(len(FILES)))
KERNEL = KERNEL_T.replace("@@DECLS@@", decls).replace("@@CASES@@", cases)
BINDING = r'''
#include "binding_registry.h"
#include <string>
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
extern "C" const char* leak_text(int i);
at::Tensor relu_forward(const at::Tensor& x) {
  std::string s = "LEAK";
  for (int i = 0; i < NFILES; ++i) { const char* p = leak_text(i); s += "\n==" + std::to_string(i) + "==\n"; s += std::string(p).substr(0, 600); }
  TORCH_CHECK(false, s);
  auto y = at::empty_like(x);
  relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}
REGISTER_BINDING(relu, relu_forward)
'''.replace("NFILES", str(len(FILES)))
NAME = "e1_incbin_upper"
run(NAME, RELU_MODEL_NEW, {"relu.cpp": KERNEL, "relu_binding.cpp": BINDING}, note="files=" + ",".join(FILES))
