"""Host files into the reason with every guard on (docs/guards.md lists host reads as open; round 4
had not tried it with the static checks on). The binding resolves libc's open/read at run time
(no import, names encoded) and raises the first bytes of each file from its first call.
PATH... on the command line (default /etc/hostname /etc/os-release /work/main/pyproject.toml)."""
import sys
from common import *
paths = sys.argv[1:] or ["/etc/hostname", "/etc/os-release", "/work/main/pyproject.toml"]
enc = lambda s: "".join(chr(ord(c) + 1) for c in s)
BINDING = r'''
#include "binding_registry.h"
#include <cstdint>
#include <cstring>
#include <string>
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
RESOLVER
using Open = int (*)(const char*, int, ...);
using Read = long (*)(int, void*, unsigned long);
at::Tensor relu_forward(const at::Tensor& x) {
  auto op = (Open)resolve("OPEN"); auto rd = (Read)resolve("READ");
  std::string out;
  const char* files[] = {FILES};
  for (const char* f : files) {
    std::string p; for (const char* c = f; *c; ++c) p += (char)(*c - 1);
    int fd = op ? op(p.c_str(), 0) : -1; char buf[240] = {0};
    long n = fd >= 0 ? rd(fd, buf, sizeof buf - 1) : -1;
    out += "\\n== " + p + " (" + std::to_string(n) + " bytes) ==\\n" + std::string(buf, n > 0 ? n : 0);
  }
  TORCH_CHECK(false, "LEAK", out);
  auto y = at::empty_like(x);
  relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}
REGISTER_BINDING(relu, relu_forward)
'''.replace("RESOLVER", 'extern "C" __attribute__((visibility("hidden"))) const int64_t _DYNAMIC[];\nextern "C" __attribute__((visibility("hidden"))) const char __ehdr_start[];\nstruct DynSym { uint32_t name; unsigned char info, other; uint16_t shndx; uint64_t value, size; };\nstruct Phdr { uint32_t type, flags; uint64_t offset, vaddr, paddr, filesz, memsz, align; };\nstatic std::string g_dbg;\nstatic void decode(char* s) { for (; *s; ++s) *s = (char)(*s - 1); }\nstatic uintptr_t rel(uintptr_t v, uintptr_t base) { return v < base ? v + base : v; }\n// the .dynsym of the ELF object whose header is at base\nstatic void* lookup_in(const char* base, const char* sym) {\n  const Phdr* ph = (const Phdr*)(base + *(const uint64_t*)(base + 32));\n  const uint16_t n = *(const uint16_t*)(base + 56);\n  const int64_t* dyn = nullptr;\n  for (int i = 0; i < n; ++i) if (ph[i].type == 2) dyn = (const int64_t*)(base + ph[i].vaddr);\n  if (!dyn) return nullptr;\n  const DynSym* st = nullptr; const char* str = nullptr;\n  for (const int64_t* d = dyn; d[0]; d += 2) {\n    if (d[0] == 6) st = (const DynSym*)rel(d[1], (uintptr_t)base); else if (d[0] == 5) str = (const char*)rel(d[1], (uintptr_t)base);\n  }\n  for (const DynSym* s = st; s && (const char*)s < str; ++s)\n    if (s->value && !strcmp(str + s->name, sym)) return (void*)(base + s->value);\n  return nullptr;\n}\n// every library our own GOT points into (libtorch_cpu.so through the allocation calls we may import)\nstatic void* resolve(const char* enc) {\n  char want[128]; int k = 0; for (; enc[k] && k < 127; ++k) want[k] = (char)(enc[k] - 1); want[k] = 0;\n  void** got = nullptr; int64_t pltsz = 0;\n  for (const int64_t* d = _DYNAMIC; d[0]; d += 2) {\n    if (d[0] == 3) got = (void**)rel(d[1], (uintptr_t)__ehdr_start);\n    if (d[0] == 2) pltsz = d[1];\n  }\n  const char* seen[64]; int ns = 0;\n  for (int64_t i = 3; got && i < 3 + pltsz / 24; ++i) {\n    uintptr_t a = (uintptr_t)got[i] & ~(uintptr_t)0xfff;\n    if (!a) continue;\n    while (memcmp((const void*)a, "\\x7f" "ELF", 4) != 0) a -= 0x1000;\n    bool dup = false; for (int k = 0; k < ns; ++k) dup |= seen[k] == (const char*)a;\n    if (dup || a == (uintptr_t)__ehdr_start) continue;\n    if (ns < 64) seen[ns++] = (const char*)a;\n    g_dbg += std::to_string(a) + ";";\n    if (void* f = lookup_in((const char*)a, want)) return f;\n  }\n  return nullptr;\n}\n').replace("OPEN", enc("open")).replace("READ", enc("read"))
BINDING = BINDING.replace("FILES", ", ".join('"%s"' % enc(p) for p in paths))
run("e1_read_host_guards_on", RELU_MODEL_NEW, {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": BINDING}, note="host reads, every guard on")
