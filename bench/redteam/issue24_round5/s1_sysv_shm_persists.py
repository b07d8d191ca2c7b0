"""State that outlives the candidate and its sandbox: System V shared memory. The candidate runs
in new network / PID / mount namespaces but the host's IPC namespace, and seccomp does not list the
SysV IPC calls. The binding (libc's shmget/shmat resolved at run time) attaches a segment under a
fixed key, reports what an earlier evaluation left there, increments a counter, and raises (−1) so
the result shows it. Run it twice: the second run reads the first's marker. MB=N makes the segment
N MiB (default: one page) to show that the memory stays allocated on the host after the
evaluation (`ipcs -m`). Clean up with `ipcrm -M 0x5eed1234`."""
import sys
from common import *
mb = next((int(a.split("=")[1]) for a in sys.argv[1:] if a.startswith("MB=")), 0)
enc = lambda s: "".join(chr(ord(c) + 1) for c in s)
BINDING = r'''
#include "binding_registry.h"
#include <cstdint>
#include <cstring>
#include <string>
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
RESOLVER
using Shmget = int (*)(int, unsigned long, int);
using Shmat = void* (*)(int, const void*, int);
using Errno = int* (*)();
at::Tensor relu_forward(const at::Tensor& x) {
  auto sg = (Shmget)resolve("SHMGET"); auto sa = (Shmat)resolve("SHMAT"); auto er = (Errno)resolve("ERRNO");
  TORCH_CHECK(sg && sa && er, "resolve");
  const unsigned long bytes = SIZE;
  int id = sg(0x5eed1234, bytes, 01000 | 0600);  // IPC_CREAT
  TORCH_CHECK(id >= 0, "shmget errno ", *er());
  char* p = (char*)sa(id, nullptr, 0);
  TORCH_CHECK(p != (char*)-1, "shmat errno ", *er());
  long* counter = (long*)p;
  const long before = *counter;
  std::string left(p + 8, strnlen(p + 8, 100));
  *counter = before + 1;
  std::string mark = "left by evaluation #" + std::to_string(before + 1);
  memcpy(p + 8, mark.c_str(), mark.size() + 1);
  for (unsigned long i = 4096; i < bytes; i += 4096) p[i] = 1;  // touch: the pages are now the host's
  TORCH_CHECK(false, "SHM id=", id, " bytes=", bytes, " evaluations before this one=", before, " found: '", left, "'");
  auto y = at::empty_like(x);
  relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}
REGISTER_BINDING(relu, relu_forward)
'''.replace("RESOLVER", 'extern "C" __attribute__((visibility("hidden"))) const int64_t _DYNAMIC[];\nextern "C" __attribute__((visibility("hidden"))) const char __ehdr_start[];\nstruct DynSym { uint32_t name; unsigned char info, other; uint16_t shndx; uint64_t value, size; };\nstruct Phdr { uint32_t type, flags; uint64_t offset, vaddr, paddr, filesz, memsz, align; };\nstatic std::string g_dbg;\nstatic void decode(char* s) { for (; *s; ++s) *s = (char)(*s - 1); }\nstatic uintptr_t rel(uintptr_t v, uintptr_t base) { return v < base ? v + base : v; }\n// the .dynsym of the ELF object whose header is at base\nstatic void* lookup_in(const char* base, const char* sym) {\n  const Phdr* ph = (const Phdr*)(base + *(const uint64_t*)(base + 32));\n  const uint16_t n = *(const uint16_t*)(base + 56);\n  const int64_t* dyn = nullptr;\n  for (int i = 0; i < n; ++i) if (ph[i].type == 2) dyn = (const int64_t*)(base + ph[i].vaddr);\n  if (!dyn) return nullptr;\n  const DynSym* st = nullptr; const char* str = nullptr;\n  for (const int64_t* d = dyn; d[0]; d += 2) {\n    if (d[0] == 6) st = (const DynSym*)rel(d[1], (uintptr_t)base); else if (d[0] == 5) str = (const char*)rel(d[1], (uintptr_t)base);\n  }\n  for (const DynSym* s = st; s && (const char*)s < str; ++s)\n    if (s->value && !strcmp(str + s->name, sym)) return (void*)(base + s->value);\n  return nullptr;\n}\n// every library our own GOT points into (libtorch_cpu.so through the allocation calls we may import)\nstatic void* resolve(const char* enc) {\n  char want[128]; int k = 0; for (; enc[k] && k < 127; ++k) want[k] = (char)(enc[k] - 1); want[k] = 0;\n  void** got = nullptr; int64_t pltsz = 0;\n  for (const int64_t* d = _DYNAMIC; d[0]; d += 2) {\n    if (d[0] == 3) got = (void**)rel(d[1], (uintptr_t)__ehdr_start);\n    if (d[0] == 2) pltsz = d[1];\n  }\n  const char* seen[64]; int ns = 0;\n  for (int64_t i = 3; got && i < 3 + pltsz / 24; ++i) {\n    uintptr_t a = (uintptr_t)got[i] & ~(uintptr_t)0xfff;\n    if (!a) continue;\n    while (memcmp((const void*)a, "\\x7f" "ELF", 4) != 0) a -= 0x1000;\n    bool dup = false; for (int k = 0; k < ns; ++k) dup |= seen[k] == (const char*)a;\n    if (dup || a == (uintptr_t)__ehdr_start) continue;\n    if (ns < 64) seen[ns++] = (const char*)a;\n    g_dbg += std::to_string(a) + ";";\n    if (void* f = lookup_in((const char*)a, want)) return f;\n  }\n  return nullptr;\n}\n').replace("SHMGET", enc("shmget")).replace("SHMAT", enc("shmat")).replace("ERRNO", enc("__errno_location"))
BINDING = BINDING.replace("SIZE", str(max(4096, mb << 20)) + "UL")
run("s1_sysv_shm", RELU_MODEL_NEW, {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": BINDING}, note=f"sysv shm {mb} MiB")
