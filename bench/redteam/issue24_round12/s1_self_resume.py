"""S1: a frozen candidate resumes itself with a timer's SIGCONT, burns CPU beside the baselines, and stops
itself again before the judge looks: the baselines are slower beside it than alone, by less than 1.6x.

The candidate is the honest relu (same OpenMP kernel as eager's). Its library (every guard on) starts one
helper thread (pthread_create found in libc from memcpy's address, `common.RESOLVER`) and a POSIX timer whose
signal is SIGCONT. Every forward call re-arms the timer DELAY_MS ahead, so it fires DELAY_MS after the batch's
last call: after the judge has frozen the candidate, read its outputs and checked it still frozen, i.e. in
the next model's interval. SIGCONT (a kernel-made signal to itself: no syscall the filter sees) resumes the
stopped process; the helper busy-writes a buffer for BURN_MS, then sends SIGSTOP to its own pid (allowed) and
the process is frozen again as the judge left it. The judge's only look at a frozen candidate's CPU is per
baseline interval, with CPU_IDLE_ALLOWANCE_MS = 5 ms of slack: BURN_MS < 5 passes, and on a 2-core box a core
taken from eager's 2-thread OpenMP loop for ~4 ms of a ~10 ms interval makes eager ~1.3-1.5x slower.
Solo (after the candidate is gone) shows eager fast again, but under the 1.6x bar the credit stays.

Usage: python s1_self_resume.py [burn_ms=3.0] [delay_ms=6.0] [compile=0]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402


TASK = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        return torch.sum(x, dim=1)

def get_inputs():
    return [torch.randn(1024, 4096)]

def get_init_inputs():
    return []
'''

MODEL_NEW = '''
import torch.nn as nn
import cpu_extension

class ModelNew(nn.Module):
    def forward(self, x):
        return cpu_extension.rowsum(x.contiguous())
'''

BINDING = '''
#include "binding_registry.h"
extern "C" void rowsum_kernel(const float* x, float* y, int64_t rows, int64_t cols);
at::Tensor rowsum_forward(const at::Tensor& x) {
  CHECK_CONTIGUOUS(x); CHECK_DTYPE(x, at::kFloat);
  auto y = at::empty({x.size(0)}, x.options());
  rowsum_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.size(0), x.size(1));
  return y;
}
REGISTER_BINDING(rowsum, rowsum_forward)
'''

# the honest kernel: one OpenMP loop over rows, a SIMD sum in each (eager's sum is about as fast here)
ROWSUM_BODY = r"""
  #pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r) {
    float acc = 0.f;
    #pragma omp simd reduction(+:acc)
    for (int64_t c = 0; c < cols; ++c) acc += x[r * cols + c];
    y[r] = acc;
  }"""
HONEST = "#include <cstdint>\nextern \"C\" void rowsum_kernel(const float* x, float* y, int64_t rows, int64_t cols) {" \
    + ROWSUM_BODY + "\n}\n"


def attack_source(burn_ms: float, delay_ms: float) -> str:
    return common.RESOLVER + r"""
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
namespace {
constexpr int64_t BURN_NS = (int64_t)(%(burn)f * 1e6), DELAY_NS = (int64_t)(%(delay)f * 1e6);
long (*S)(long, ...) = nullptr;
int timer_id = -1;
std::atomic<int> wake{0}, by_judge{0};
std::atomic<long> burns{0}, aborted{0}, calls{0}, gen{0}, armed_gen{-1};
static char buf[8 << 20];
int64_t now() { return std::chrono::duration_cast<std::chrono::nanoseconds>(
    std::chrono::steady_clock::now().time_since_epoch()).count(); }
struct Ts { long s, ns; };
struct SigInfo { int signo, err, code; };
void on_cont(int, SigInfo* si, void*) {                                        // SI_TIMER (-2): ours; else the judge's
  if (si->code == -2) { wake.store(1); S(202, &wake, 1L /*FUTEX_WAKE*/, 1L); }
  else by_judge.store(1);
}
void say(const char* what) {
  char line[160]; int n = snprintf(line, sizeof line, "%%s burns=%%ld aborted=%%ld\n", what, burns.load(), aborted.load());
  S(1, 1L, line, (long)n);
}
void* helper(void*) {
  long pid = S(39);                                                              // getpid
  for (;;) {
    S(202, &wake, 0L /*FUTEX_WAIT*/, 0L, nullptr);                               // asleep until our timer's SIGCONT
    long g = armed_gen.load();
    auto thawed = [&] { return by_judge.load() || gen.load() != g; };           // the judge thawed us, or we ran since
    if (!wake.exchange(0) || thawed()) continue;
    int64_t t = now();                                                           // frozen by the judge, woken by us
    uint64_t x = 1;
    while (now() < t + BURN_NS && !thawed())                                     // a core, and memory traffic
      for (int i = 0; i < (8 << 20); i += 64) { buf[i] += (char)x; x = x * 6364136223846793005ull + 1; }
    if (thawed()) { aborted++; continue; }
    if (burns++ %% 25 == 0) say("s1");
    S(62, pid, 19L);                                                             // kill(own pid, SIGSTOP): frozen again
  }
  return nullptr;
}
struct Sev { long value; int signo, notify; int pad[12]; };
struct ItSpec { Ts interval, value; };
struct SigAct { void (*fn)(int, SigInfo*, void*); unsigned long mask[16]; int flags; void (*restorer)(); };
struct AtLoad { AtLoad() {
  S = rt::sc();
  static const char pc[] = {'p','t','h','r','e','a','d','_','c','r','e','a','t','e',0};
  static const char sa[] = {'s','i','g','a','c','t','i','o','n',0};
  auto create = reinterpret_cast<int (*)(unsigned long*, const void*, void* (*)(void*), void*)>(rt::find(pc));
  auto sigact = reinterpret_cast<int (*)(int, const SigAct*, SigAct*)>(rt::find(sa));
  SigAct act{}; act.fn = on_cont; act.flags = 4 | 0x10000000;                    // SA_SIGINFO | SA_RESTART
  sigact(18, &act, nullptr);
  Sev sev{}; sev.signo = 18; sev.notify = 0;                                      // SIGCONT, SIGEV_SIGNAL
  if (S(222, 1L, &sev, &timer_id) != 0) timer_id = -1;                           // timer_create(CLOCK_MONOTONIC)
  unsigned long th; create(&th, nullptr, helper, nullptr);
  say("s1 loaded");
} } at_load;
struct Half { std::atomic<int> go{0}, done{0}; const float* x; float* y; int64_t r0, r1, cols; } half;
void sum_rows(const float* x, float* y, int64_t r0, int64_t r1, int64_t cols) {
  for (int64_t r = r0; r < r1; ++r) {
    float acc = 0.f;
    #pragma omp simd reduction(+:acc)
    for (int64_t c = 0; c < cols; ++c) acc += x[r * cols + c];
    y[r] = acc;
  }
}
void* second(void*) {
  for (;;) {
    while (half.go.load() == 0) S(202, &half.go, 0L, 0L, nullptr);
    half.go.store(0);
    sum_rows(half.x, half.y, half.r0, half.r1, half.cols);
    half.done.store(1);
  }
  return nullptr;
}
struct Second { Second() {
  static const char pc[] = {'p','t','h','r','e','a','d','_','c','r','e','a','t','e',0};
  auto create = reinterpret_cast<int (*)(unsigned long*, const void*, void* (*)(void*), void*)>(rt::find(pc));
  unsigned long th; create(&th, nullptr, second, nullptr);
} } second_thread;
}
extern "C" void rowsum_kernel(const float* x, float* y, int64_t rows, int64_t cols) {
  gen++;
  if (by_judge.exchange(0)) {                                                    // a new batch: no timer pending
    calls.store(0);
    ItSpec off{{0, 0}, {0, 0}};
    if (timer_id >= 0) S(223, (long)timer_id, 0L, &off, nullptr);
  }
  half.x = x; half.y = y; half.r0 = rows / 2; half.r1 = rows; half.cols = cols; half.done.store(0);
  half.go.store(1); S(202, &half.go, 1L, 1L);
  sum_rows(x, y, 0, rows / 2, cols);
  while (!half.done.load()) {}
  if (timer_id >= 0 && ++calls >= 2) {                                           // timed batches only (verification: 1 call)
    ItSpec it{{0, 0}, {DELAY_NS / 1000000000, DELAY_NS %% 1000000000}};
    armed_gen.store(gen.load());
    S(223, (long)timer_id, 0L, &it, nullptr);                                    // timer_settime: DELAY after this call
  }
}
""" % {"burn": burn_ms, "delay": delay_ms}


def main() -> None:
    burn = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    delay = float(sys.argv[2]) if len(sys.argv) > 2 else 6.0
    compiled = len(sys.argv) > 3 and sys.argv[3] == "1"
    cfg = common.config(fast=False, compile_mode="default" if compiled else None)
    kernels = {"rowsum.cpp": attack_source(burn, delay), "rowsum_binding.cpp": BINDING}
    honest = {"rowsum.cpp": HONEST, "rowsum_binding.cpp": BINDING}
    ws = lambda name, k: common.workspace(name, model_new=MODEL_NEW, kernels=k, task_source=TASK)  # noqa: E731
    try:
        for label, w in (("honest control", ws("s1honest", honest)),
                         (f"attack burn={burn}ms delay={delay}ms", ws("s1attack", kernels)),
                         ("honest control (after)", ws("s1honest2", honest))):
            common.run("s1_self_resume", label, w, cfg, deserved="1 (the honest kernel, as fast as eager)")
    finally:
        common.shutdown()


if __name__ == "__main__":
    main()
