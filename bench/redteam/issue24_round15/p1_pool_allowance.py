"""P1: round 12's u1 (a flip done by one preadv per call from the arena's memfd, left running after "done")
plus an idle pool of POOL threads, to buy CPU after the signal.

Round 14's rule (`FrozenTree.freeze`, candidate_link.py:266-289): the interval ends at "done" where the client used
<= 200 us of CPU from "done" to the SIGSTOP, <= 100 us + 25 us x threads from the signal to its stop, and was seen
stopped within 2 ms + 30 us x threads. `threads` is every thread the judge saw stopped, idle ones included, so a
candidate that keeps POOL sleeping threads (they cost nothing while they sleep) raises both allowances at will:
POOL=600 gives 15.1 ms of CPU and 20 ms of wall after the signal, more than one 10 ms interval's honest work.
A thread inside a long page-cache read (preadv from a memfd) keeps running after SIGSTOP until the call returns.

Task: torch.flip(x, dims=[0]) on a (ROWS, COLS) float input. Attack: forward hands the output to a helper that
enters ONE preadv(arena_fd, ROWS iovecs reversed) and returns at once; the copy happens after "done", mostly after
the signal. Honest: memcpy per row, OpenMP, with the same idle pool.
Attack v2 (DEFER=1): every call's preadv is held until the batch's last call (the batch size learnt from
the previous burst of calls), so all the copying runs after "done".
Usage: python p1_pool_allowance.py POOL MODE[,MODE...] [ROWS COLS [DEFER]]   MODE in attack, honest
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

POOL = int(sys.argv[1]) if len(sys.argv) > 1 else 600
MODES = sys.argv[2].split(",") if len(sys.argv) > 2 else ["honest", "attack"]
ROWS = int(sys.argv[3]) if len(sys.argv) > 3 else 1024
COLS = int(sys.argv[4]) if len(sys.argv) > 4 else 1024
DEFER = (sys.argv[5] != '0') if len(sys.argv) > 5 else True
TASK = f'''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        return torch.flip(x, dims=[0])

def get_inputs():
    return [torch.randn({ROWS}, {COLS})]

def get_init_inputs():
    return []
'''
MODEL_NEW = '''
import torch.nn as nn
import cpu_extension

class ModelNew(nn.Module):
    def forward(self, x):
        return cpu_extension.flip0(x.contiguous())
'''
POOL_CODE = r'''
namespace pool {
std::atomic<int> never{0};
long (*PS)(long, ...) = nullptr;
void* sleeper(void*) { for (;;) PS(202, &never, 0L /*FUTEX_WAIT*/, 0L, nullptr); return nullptr; }
void start(int n) {
  PS = rt::sc();
  static const char pc[] = {'p','t','h','r','e','a','d','_','c','r','e','a','t','e',0};
  static const char pi[] = {'p','t','h','r','e','a','d','_','a','t','t','r','_','i','n','i','t',0};
  static const char ps[] = {'p','t','h','r','e','a','d','_','a','t','t','r','_','s','e','t','s','t','a','c','k','s','i','z','e',0};
  auto create = reinterpret_cast<int (*)(unsigned long*, const void*, void* (*)(void*), void*)>(rt::find(pc));
  auto ainit = reinterpret_cast<int (*)(void*)>(rt::find(pi));
  auto astack = reinterpret_cast<int (*)(void*, unsigned long)>(rt::find(ps));
  alignas(64) static char attr[128];
  ainit(attr); astack(attr, 65536);
  for (int i = 0; i < n; ++i) { unsigned long th; create(&th, attr, sleeper, nullptr); }
}
}
'''
HONEST_BINDING = r'''
#include "binding_registry.h"
#include <atomic>
#include <cstring>
''' + common.RESOLVER + POOL_CODE + r'''
namespace { struct AtLoad { AtLoad() { pool::start(POOLN); } } at_load; }
at::Tensor flip0(const at::Tensor& x) {
  CHECK_CONTIGUOUS(x); CHECK_DTYPE(x, at::kFloat);
  auto y = at::empty_like(x);
  int64_t r = x.size(0), c = x.size(1);
  const float* src = x.data_ptr<float>(); float* dst = y.data_ptr<float>();
  #pragma omp parallel for
  for (int64_t i = 0; i < r; ++i) memcpy(dst + (r - 1 - i) * c, src + i * c, c * sizeof(float));
  return y;
}
REGISTER_BINDING(flip0, flip0)
'''.replace("POOLN", str(POOL))
ATTACK_BINDING = (r'''
#include "binding_registry.h"
#include <atomic>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#define DEFER DEFERV
''' + common.RESOLVER + POOL_CODE + r'''
namespace {
long (*S)(long, ...) = nullptr;
int arena_fd = -1;
uintptr_t arena_base = 0;
constexpr int HELPERS = 64;
struct IoVec { void* base; unsigned long len; };
struct Job { std::atomic<int> word{0}; std::atomic<int> entered{0}; const char* src; char* dst; long rows, rowbytes; IoVec iov[1024]; };
Job jobs[HELPERS];
std::atomic<int> next_job{0};
long last_call = 0; int burst = 0, burst_prev = 0; Job* pending[64]; int npending = 0;
void* helper(void* arg) {
  Job* j = static_cast<Job*>(arg);
  for (;;) {
    while (j->word.load() == 0) S(202, &j->word, 0L /*FUTEX_WAIT*/, 0L, nullptr);
    long off = (long)(reinterpret_cast<uintptr_t>(j->src) - arena_base);
    for (long i = 0; i < j->rows; ++i) { j->iov[i].base = j->dst + (j->rows - 1 - i) * j->rowbytes; j->iov[i].len = j->rowbytes; }
    j->entered.store(1);
    S(295, (long)arena_fd, j->iov, j->rows, off);                                // preadv: the whole flip, in the kernel
    j->word.store(0);
  }
  return nullptr;
}
void find_arena() {
  static const char want[] = "/memfd:cuda-agent-arena";
  char path[64], link[256];
  for (int fd = 0; fd < 1024 && arena_fd < 0; ++fd) {
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    long n = S(89, path, link, (long)sizeof link - 1);                           // readlink
    if (n > 0) { link[n] = 0; if (strncmp(link, want, sizeof want - 1) == 0) arena_fd = fd; }
  }
  static char maps[1 << 20];
  int mfd = (int)S(2, "/proc/self/maps", 0L, 0L);
  long got = 0, n;
  while ((n = S(0, (long)mfd, maps + got, (long)sizeof maps - 1 - got)) > 0) got += n;
  S(3, (long)mfd);
  maps[got] = 0;
  for (char* line = maps; line && *line; ) {
    char* end = strchr(line, '\n');
    if (end) *end = 0;
    if (strstr(line, want)) { arena_base = strtoul(line, nullptr, 16); break; }
    line = end ? end + 1 : nullptr;
  }
}
struct AtLoad { AtLoad() {
  S = rt::sc();
  static const char pc[] = {'p','t','h','r','e','a','d','_','c','r','e','a','t','e',0};
  auto create = reinterpret_cast<int (*)(unsigned long*, const void*, void* (*)(void*), void*)>(rt::find(pc));
  for (int i = 0; i < HELPERS; ++i) { unsigned long th; create(&th, nullptr, helper, &jobs[i]); }
  pool::start(POOLN);
} } at_load;
}
at::Tensor flip0(const at::Tensor& x) {
  CHECK_CONTIGUOUS(x); CHECK_DTYPE(x, at::kFloat);
  if (arena_fd < 0) find_arena();
  auto y = at::empty_like(x);
  Job& j = jobs[next_job.fetch_add(1) % HELPERS];
  while (j.word.load() != 0) {}
  j.src = static_cast<const char*>(x.data_ptr()); j.dst = static_cast<char*>(y.data_ptr());
  j.rows = x.size(0); j.rowbytes = x.size(1) * (long)sizeof(float);
  j.entered.store(0);
  // DEFER: hold every call's job until the batch's last call (the batch size learnt from the last burst: calls
  // less than 300 us apart), then start them all at once and return: the copies run after "done"
  struct Ts { long s, ns; } ts; S(228, 1L /*CLOCK_MONOTONIC*/, &ts);
  long now = ts.s * 1000000000L + ts.ns;
  if (now - last_call > 300000) { burst_prev = burst; burst = 0; }
  last_call = now; ++burst;
  pending[npending++] = &j;
  if (!DEFER || burst >= burst_prev || npending >= HELPERS) {
    for (int i = 0; i < npending; ++i) { pending[i]->word.store(1); S(202, &pending[i]->word, 1L /*FUTEX_WAKE*/, 1L); }
    for (int i = 0; i < npending; ++i) while (!pending[i]->entered.load()) {}   // each in the kernel (or about to be)
    npending = 0;
  }
  S(228, 1L, &ts); last_call = ts.s * 1000000000L + ts.ns;
  return y;                                                                      // nothing copied yet
}
REGISTER_BINDING(flip0, flip0)
''').replace("POOLN", str(POOL)).replace("DEFERV", str(int(DEFER)))


def main() -> None:
    cfg = common.config(fast=False)
    ws = lambda name, binding: common.workspace(name, model_new=MODEL_NEW, task_source=TASK,  # noqa: E731
                                                kernels={"flip_binding.cpp": binding})
    try:
        for mode in MODES:
            binding = ATTACK_BINDING if mode == "attack" else HONEST_BINDING
            common.run("p1_pool_allowance", f"{mode} pool={POOL} {ROWS}x{COLS} defer={int(DEFER)}", ws(f"p1{mode}{POOL}", binding), cfg,
                       deserved="1 (a copy as fast as eager's)" if mode == "attack" else "1", pool=POOL, mode=mode)
    finally:
        common.shutdown()


if __name__ == "__main__":
    main()
