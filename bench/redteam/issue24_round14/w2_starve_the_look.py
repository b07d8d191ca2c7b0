"""w2: the judge's look starved of CPU by threads that were already seen asleep (AT_ONCE_S / SETTLE_S rule).

`FrozenTree.freeze` (candidate_link.py:240) reads every thread's state once (`_settles`, line 263: all of
/proc/<pid>/task/*/stat, in thread-creation order), then sends SIGSTOP, then waits until all are seen stopped;
where the look found every thread asleep and the stop was seen within AT_ONCE_S (2 ms) of the signal, the
interval ends at "done" (`ends_at_stop`, judge.py:1507). Nothing bounds the look itself, and a thread that was
read asleep may run from then on. Here:
  - WORKERS threads (created first, read first, asleep in a futex) and SLEEPERS idle threads (read after them);
  - on the judge's receive of "done" (EPOLLOUT edge on the channel socket) a trigger thread sleeps DELTA_US
    (everyone asleep at their own read), then wakes the workers: they finish the batch's last K flips and then
    spin (user space) until SPIN_US has passed, so the judge's look, which still has SLEEPERS stat files to
    read, shares 2 cores with WORKERS busy threads and takes several times longer;
  - the SIGSTOP stops the spinning workers at once, and the wait's scan runs at full speed: "at once".
So the last K calls of every batch are computed after "done", untimed. Verification (slot 0) is never deferred.
Control: the same library with K = 0. Usage: w2_starve_the_look.py K DELTA_US SLEEPERS WORKERS SPIN_US ROWS [attack|control|both]
"""
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESOLVER, config, run, shutdown, workspace  # noqa: E402
from w1_look_window import BINDING, MODEL_NEW  # noqa: E402

A = [int(a) for a in sys.argv[1:7]] + [None] * 6
K, DELTA, SLEEPERS, WORKERS, SPIN, ROWS = [a if a is not None else d for a, d in zip(A, (4, 300, 150, 6, 8000, 256))]
COLS = 2048
TASK = f'''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        return torch.flip(x, [0])

def get_inputs():
    return [torch.randn({ROWS}, {COLS})]

def get_init_inputs():
    return []
'''

KERNEL = RESOLVER + r'''
#include <atomic>
#include <cstdio>
struct TS { long s, ns; };
static long (*SC)(long, ...) = nullptr;
static int (*PC)(void*, const void*, void* (*)(void*), void*) = nullptr;  // pthread_create
static int (*CGT)(int, TS*) = nullptr;  // clock_gettime (vDSO-backed)
struct Job { const float* x; float* y; int64_t rows, cols; int64_t r0 = 0, r1 = -1; };
static Job q[64]; static int qn = 0;           // pending calls (main thread)
static Job work[4096]; static std::atomic<int> nwork{0}, next_job{0}, jobs_done{0};
static std::atomic<int> go{0};
static std::atomic<long> calls{0};
static const float* slot0 = nullptr;
static const long K = K_VALUE, DELTA = DELTA_US_VALUE, SLEEPERS = SLEEPERS_VALUE, WORKERS = WORKERS_VALUE, SPIN = SPIN_US_VALUE;
static std::atomic<long> by_workers{0}, rounds{0}, leftovers{0};
static int ep = -1; static int never = 0;

static long mono_ns() { TS t; CGT(1, &t); return t.s * 1000000000L + t.ns; }
static void sleep_us(long us) { TS t{us / 1000000, (us % 1000000) * 1000}; SC(35, &t, nullptr); }
static void flip(const Job& j) {
  int64_t hi = j.r1 < 0 ? j.rows : j.r1;
  for (int64_t r = j.r0; r < hi; ++r) memcpy(j.y + r * j.cols, j.x + (j.rows - 1 - r) * j.cols, j.cols * sizeof(float));
}
static void take_jobs() {
  for (;;) { int i = next_job.fetch_add(1); if (i >= nwork.load()) break; flip(work[i]); jobs_done++; by_workers++; }
}
static void spin_until(long end, long c0) { while (mono_ns() < end && calls.load() == c0) {} }

static void* worker(void*) {
  int seen = 0;
  for (;;) {
    int g = go.load();
    if (g == seen) { SC(202, &go, 0, g, nullptr, nullptr, 0); continue; }  // FUTEX_WAIT: asleep (S)
    seen = g;
    long c0 = calls.load(), end = mono_ns() + SPIN * 1000;
    take_jobs();
    spin_until(end, c0);  // keeps a core busy while the judge is still reading stat files
  }
  return nullptr;
}
static void* trigger(void*) {
  struct { unsigned int events; unsigned long data; } __attribute__((packed)) evs[8];
  for (;;) {
    SC(232, ep, evs, 8, -1);  // epoll_wait: the judge has just read our "done"
    if (!qn) continue;
    if (DELTA) sleep_us(DELTA);  // asleep when the look reads this thread
    int n = 0;
    for (int i = 0; i < qn; ++i) for (int64_t r = 0; r < q[i].rows; r += 32) {  // row chunks: shared out finely
      work[n] = q[i]; work[n].r0 = r; work[n].r1 = r + 32 < q[i].rows ? r + 32 : q[i].rows; ++n; }
    qn = 0; jobs_done = 0; next_job = 0; nwork = n;
    rounds++;
    go++;
    SC(202, &go, 1, 1 << 30, nullptr, nullptr, 0);  // FUTEX_WAKE all workers
    long c0 = calls.load(), end = mono_ns() + SPIN * 1000;
    take_jobs();
    spin_until(end, c0);
  }
  return nullptr;
}
static void* sleeper(void*) { for (;;) SC(202, &never, 0, 0, nullptr, nullptr, 0); return nullptr; }

__attribute__((constructor)) static void init() {
  SC = rt::sc();
  static const char n[] = {'p','t','h','r','e','a','d','_','c','r','e','a','t','e',0};
  PC = reinterpret_cast<int (*)(void*, const void*, void* (*)(void*), void*)>(rt::find(n));
  static const char cg[] = {'c','l','o','c','k','_','g','e','t','t','i','m','e',0};
  CGT = reinterpret_cast<int (*)(int, TS*)>(rt::find(cg));
  if (!K) return;
  SC(157, 29, 1000, 0, 0, 0);  // PR_SET_TIMERSLACK 1 us
  ep = (int)SC(291, 0);  // epoll_create1
  struct { unsigned long dev, ino, nlink; unsigned int mode, uid, gid, pad; unsigned long rdev; long size, blksize, blocks; long rest[9]; } st;
  for (int fd = 0; fd < 256; ++fd) if (SC(5, fd, &st) == 0 && (st.mode & 0170000) == 0140000) {
    struct { unsigned int events; unsigned long data; } __attribute__((packed)) ev{0x4u | (1u << 31), (unsigned long)fd};
    SC(233, ep, 1, fd, &ev);  // EPOLL_CTL_ADD, EPOLLOUT | EPOLLET
  }
  unsigned long th; PC(&th, nullptr, trigger, nullptr);
  for (long i = 0; i < WORKERS; ++i) PC(&th, nullptr, worker, nullptr);
  for (long i = 0; i < SLEEPERS; ++i) PC(&th, nullptr, sleeper, nullptr);
}

extern "C" void flip_kernel(const float* x, float* y, int64_t rows, int64_t cols) {
  Job j{x, y, rows, cols};
  if (!slot0) slot0 = x;
  long c = ++calls;
  if (c % 500 == 0) { char b[200]; int k = snprintf(b, sizeof b, "w2: calls %ld by_workers %ld rounds %ld leftovers %ld\n",
      c, by_workers.load(), rounds.load(), leftovers.load()); SC(1, 2, b, k); }
  while (jobs_done.load() < nwork.load() && next_job.load() < nwork.load()) take_jobs();  // a round the workers left
  if (!K || x == slot0) { flip(j); return; }  // verification (slot 0 only) and the control
  if (qn == K) { flip(q[0]); for (int i = 1; i < qn; ++i) q[i - 1] = q[i]; --qn; }
  q[qn++] = j;  // the newest K calls of a batch stay pending: done after "done"
}
'''


def files(k: int) -> dict:
    src = (KERNEL.replace("K_VALUE", str(k)).replace("DELTA_US_VALUE", str(DELTA)).replace("SLEEPERS_VALUE", str(SLEEPERS))
           .replace("WORKERS_VALUE", str(WORKERS)).replace("SPIN_US_VALUE", str(SPIN)))
    return {"flip.cpp": src, "flip_binding.cpp": BINDING}


if __name__ == "__main__":
    which = sys.argv[7] if len(sys.argv) > 7 else "both"
    try:
        cfg = config(fast=False)
        if which in ("both", "control"):
            run("w2_starve_the_look", f"control: K=0, rows {ROWS}", workspace("w2_control", MODEL_NEW, files(0), TASK),
                cfg, deserved="its own speed", log_chars=300)
        if which in ("both", "attack"):
            run("w2_starve_the_look", f"attack: K={K} delta={DELTA}us sleepers={SLEEPERS} workers={WORKERS} spin={SPIN}us rows {ROWS}",
                workspace("w2_attack", MODEL_NEW, files(K), TASK), cfg,
                deserved="the control's reward (K calls per batch computed after done, uncounted)", log_chars=300,
                args=[K, DELTA, SLEEPERS, WORKERS, SPIN, ROWS])
    finally:
        shutdown()
