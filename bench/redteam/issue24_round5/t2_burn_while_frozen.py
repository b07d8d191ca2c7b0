"""Burn CPU while frozen to slow the baselines (<= 1.6x is still credited). The outputs are computed
honestly inside each call (the naive single-thread log-softmax, as in h1/t1). After every call a
worker thread keeps a busy loop running for WINDOW ms while a POSIX timer sends the process SIGCONT
every 100 us, undoing the judge's SIGSTOP, so the worker competes for the 2 cores with whatever the
judge times next. libc resolved at run time as in t1. MODE: attack | honest; window=MS (default 30)."""
import sys
from common import *
ROWS, COLS = 128, 32768
TASK = f'''
import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        return torch.log(torch.softmax(x, dim=1))
def get_inputs():
    return [torch.randn({ROWS}, {COLS})]
def get_init_inputs():
    return []
'''
KERNEL = r'''
#include <cstdint>
#include <cmath>
extern "C" void log_softmax_naive(const float* x, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols; float* yr = y + r * cols;
    float m = -INFINITY;
    for (int64_t i = 0; i < cols; ++i) m = xr[i] > m ? xr[i] : m;
    double s = 0;
    for (int64_t i = 0; i < cols; ++i) s += std::exp((double)(xr[i] - m));
    const float l = (float)std::log(s);
    for (int64_t i = 0; i < cols; ++i) yr[i] = xr[i] - m - l;
  }
}
'''
BINDING = r'''
#include "binding_registry.h"
#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <cstdio>
#include <chrono>
#include <ctime>
extern "C" void log_softmax_naive(const float* x, float* y, int64_t rows, int64_t cols);
// glibc x86-64 layouts (the headers that declare them are not on the include allow-list)
struct SigEvent { void* value; int signo; int notify; int pad[12]; };
struct ITimerSpec { struct timespec interval, value; };
using TimerId = void*;
extern "C" __attribute__((visibility("hidden"))) const int64_t _DYNAMIC[];
extern "C" __attribute__((visibility("hidden"))) const char __ehdr_start[];
struct DynSym { uint32_t name; unsigned char info, other; uint16_t shndx; uint64_t value, size; };
struct Phdr { uint32_t type, flags; uint64_t offset, vaddr, paddr, filesz, memsz, align; };
static uintptr_t rel(uintptr_t v, uintptr_t base) { return v < base ? v + base : v; }
static void* lookup_in(const char* base, const char* sym) {
  const Phdr* ph = (const Phdr*)(base + *(const uint64_t*)(base + 32));
  const uint16_t n = *(const uint16_t*)(base + 56);
  const int64_t* dyn = nullptr;
  for (int i = 0; i < n; ++i) if (ph[i].type == 2) dyn = (const int64_t*)(base + ph[i].vaddr);
  if (!dyn) return nullptr;
  const DynSym* st = nullptr; const char* str = nullptr; const uint16_t* ver = nullptr;
  for (const int64_t* d = dyn; d[0]; d += 2) {
    if (d[0] == 6) st = (const DynSym*)rel(d[1], (uintptr_t)base);
    else if (d[0] == 5) str = (const char*)rel(d[1], (uintptr_t)base);
    else if (d[0] == 0x6ffffff0) ver = (const uint16_t*)rel(d[1], (uintptr_t)base);
  }
  for (const DynSym* s = st; s && (const char*)s < str; ++s)
    if (s->value && !strcmp(str + s->name, sym) && !(ver && (ver[s - st] & 0x8000))) return (void*)(base + s->value);
  return nullptr;
}
static void* resolve(const char* enc) {  // name with every byte + 1
  char sym[64]; int k = 0; for (; enc[k] && k < 63; ++k) sym[k] = (char)(enc[k] - 1); sym[k] = 0;
  void** got = nullptr; int64_t pltsz = 0;
  for (const int64_t* d = _DYNAMIC; d[0]; d += 2) {
    if (d[0] == 3) got = (void**)rel(d[1], (uintptr_t)__ehdr_start);
    if (d[0] == 2) pltsz = d[1];
  }
  const char* seen[64]; int ns = 0;
  for (int64_t i = 3; got && i < 3 + pltsz / 24; ++i) {
    uintptr_t a = (uintptr_t)got[i] & ~(uintptr_t)0xfff;
    if (!a) continue;
    while (memcmp((const void*)a, "\x7f" "ELF", 4) != 0) a -= 0x1000;
    bool dup = false; for (int j = 0; j < ns; ++j) dup |= seen[j] == (const char*)a;
    if (dup || a == (uintptr_t)__ehdr_start) continue;
    if (ns < 64) seen[ns++] = (const char*)a;
    if (void* f = lookup_in((const char*)a, sym)) return f;
  }
  return nullptr;
}
using PthreadCreate = int (*)(unsigned long*, const void*, void* (*)(void*), void*);
using TimerCreate = int (*)(int, SigEvent*, TimerId*);
using TimerSettime = int (*)(TimerId, int, const ITimerSpec*, ITimerSpec*);
using Open = int (*)(const char*, int, ...);
using Pread = long (*)(int, void*, size_t, long);
using Write = long (*)(int, const void*, size_t);
using Fsync = int (*)(int);
using Nanosleep = int (*)(const struct timespec*, struct timespec*);
using Errno = int* (*)();
using Memalign = int (*)(void**, size_t, size_t);
static TimerSettime p_settime; static Pread p_pread; static Nanosleep p_sleep;
static TimerId g_timer;
static int g_fd = -1; static const long FILE_BYTES = 32L << 20, CHUNK = 4L << 20;
struct Job { at::Tensor x, y; };  // holds both, so a released output stays alive until written
static const int64_t SYNC_ROWS = SYNCROWS;  // done inside the call: keeps the batch size m (and the hidden work per batch) small
static const int NJ = 1 << 12;
static Job g_jobs[NJ];
static std::atomic<long> g_head{0}, g_tail{0};
static std::atomic<long> g_done_async{0};
static std::atomic<long> g_reads{0}, g_read_ns{0};
static long now_us() { return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
static long g_enq_us[1 << 12];
static void nap(long ns) { struct timespec t{0, ns}; p_sleep(&t, nullptr); }
static void arm(bool on) {
  ITimerSpec it{}; if (on) { it.value.tv_nsec = PERIOD_NS; it.interval.tv_nsec = PERIOD_NS; }
  p_settime(g_timer, 0, &it, nullptr);
}
static std::atomic<long> g_last_call_us{0};
static std::atomic<bool> g_in_call{false};
static volatile double g_sink = 0;
static void* burner(void*) {
  bool armed = false; long windows = 0, burned_us = 0, w0 = 0, ran_us = 0, chunks = 0;
  for (;;) {
    if (now_us() - g_last_call_us.load() < WINDOW_US) {
      if (!armed) { arm(true); armed = true; w0 = now_us(); }
      const long c0 = now_us();
      double a = 1.0; for (int i = 0; i < 20000; ++i) a = a * 1.0000001 + 1e-9; g_sink = a;
      const long dc = now_us() - c0;
      // chunks not interrupted by a stop, outside any call and > 2 ms after the last call returned
      if (dc < 200 && !g_in_call.load() && c0 - g_last_call_us.load() > 2000) { ran_us += dc; ++chunks; }
      continue;
    }
    if (armed) {
      arm(false); armed = false; burned_us += now_us() - w0; ++windows;
      if (windows % 10 == 0) fprintf(stderr, "burn windows=%ld wall in windows=%ld ms, ran %ld ms in %ld uninterrupted chunks (after the calls' answers)\n", windows, burned_us / 1000, ran_us / 1000, chunks);
    }
    nap(200000);
  }
  return nullptr;
}
static void* worker(void*) {
  bool armed = false;
  for (;;) {
    const long t = g_tail.load(std::memory_order_acquire), h = g_head.load(std::memory_order_acquire);
    if (t < h) {
      if (!armed) { arm(true); armed = true; }
      Job j = std::move(g_jobs[t % NJ]);
      const int64_t cols = j.x.size(1);
      log_softmax_naive(j.x.data_ptr<float>() + SYNC_ROWS * cols, j.y.data_ptr<float>() + SYNC_ROWS * cols, j.x.size(0) - SYNC_ROWS, cols);
      g_tail.store(t + 1, std::memory_order_release);
      const long d = g_done_async.fetch_add(1);
      if (d < 40) fprintf(stderr, "job %ld done %ld us after enqueue (queue left %ld) reads=%ld avg_read_us=%ld\n", t, now_us() - g_enq_us[t % NJ], g_head.load() - t - 1, g_reads.load(), g_reads.load() ? g_read_ns.load() / 1000 / g_reads.load() : 0);
      continue;
    }
    if (armed) { arm(false); armed = false; if (g_head.load() != t) { arm(true); armed = true; continue; } }
    nap(20000);
  }
  return nullptr;
}
static void* reader(void* arg) {
  void* buf = arg; long off = 0;
  for (;;) {
    if (g_tail.load() < g_head.load()) { const long t0 = now_us(); const long r = p_pread(g_fd, buf, CHUNK, off); g_read_ns += (now_us() - t0) * 1000; if (r > 0) g_reads++; else if (g_reads.load() == 0) { fprintf(stderr, "pread=%ld\n", r); nap(1000000); } off = (off + CHUNK) % FILE_BYTES; }
    else nap(20000);
  }
  return nullptr;
}
static std::string g_setup_err;
static bool setup() {
  auto pc = (PthreadCreate)resolve("quisfbe`dsfbuf");
  auto tc = (TimerCreate)resolve("ujnfs`dsfbuf");
  p_settime = (TimerSettime)resolve("ujnfs`tfuujnf");
  auto op = (Open)resolve("pqfo");
  p_pread = (Pread)resolve("qsfbe75");
  auto wr = (Write)resolve("xsjuf");
  auto fs = (Fsync)resolve("gtzod");
  p_sleep = (Nanosleep)resolve("oboptmffq");
  auto er = (Errno)resolve("``fssop`mpdbujpo");
  auto ma = (Memalign)resolve("qptjy`nfnbmjho");
  if (!pc || !tc || !p_settime || !op || !p_pread || !wr || !fs || !p_sleep || !er || !ma) { g_setup_err = "resolve"; return false; }
  char name[] = "etubuf/cjo"; for (char* c = name; *c; ++c) *c = (char)(*c - 1);  // dstate.bin in the scratch cwd
  int fd = op(name, 01 | 0100 | 01000, 0600);
  if (fd < 0) { g_setup_err = "create " + std::to_string(*er()); return false; }
  std::string block(1 << 20, 'x');
  for (long w = 0; w < FILE_BYTES; w += block.size()) if (wr(fd, block.data(), block.size()) <= 0) { g_setup_err = "write " + std::to_string(*er()); return false; }
  fs(fd);
  g_fd = op(name, 0 | 040000, 0);  // O_RDONLY | O_DIRECT
  if (g_fd < 0) { g_setup_err = "odirect " + std::to_string(*er()); return false; }
  SigEvent ev{}; ev.notify = 0 /* SIGEV_SIGNAL */; ev.signo = 18 /* SIGCONT */;
  if (tc(1 /* CLOCK_MONOTONIC */, &ev, &g_timer) != 0) { g_setup_err = "timer_create " + std::to_string(*er()); return false; }
  unsigned long tid;
  if (pc(&tid, nullptr, burner, nullptr) != 0) { g_setup_err = "pthread_create"; return false; }
  return true;
}
static long g_calls = 0;
at::Tensor lsm_forward(const at::Tensor& x) {
  CHECK_CONTIGUOUS(x); CHECK_DTYPE(x, at::kFloat);
  ++g_calls;
  g_in_call.store(true);
  auto y = at::empty_like(x);
  if (ATTACK && g_calls == 1) { bool ok = setup(); TORCH_CHECK(ok, "setup failed: ", g_setup_err); }
  log_softmax_naive(x.data_ptr<float>(), y.data_ptr<float>(), x.size(0), x.size(1));
  if (ATTACK && g_calls > 6) g_last_call_us.store(now_us());
  g_in_call.store(false);
  return y;
}
REGISTER_BINDING(lsm, lsm_forward)
'''
MODEL = '''
import torch.nn as nn
import cpu_extension
class ModelNew(nn.Module):
    def forward(self, x):
        return cpu_extension.lsm(x.contiguous())
'''
args = sys.argv[1:]
opt = dict(a.split("=") for a in args if "=" in a)
window = int(opt.get("window", 30))
for mode in [a for a in args if "=" not in a] or ["attack"]:
    b = BINDING.replace("ATTACK", "1" if mode == "attack" else "0").replace("SYNCROWS", "0").replace("PERIOD_NS", "100000").replace("WINDOW_US", str(window * 1000))
    run(f"t2_{mode}_w{window}", MODEL, {"lsm.cpp": KERNEL, "lsm_binding.cpp": b}, task=TASK, note=f"{mode} window_ms={window}")
