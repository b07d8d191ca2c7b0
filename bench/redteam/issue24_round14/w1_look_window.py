"""w1: untimed work inside the judge's look, made long by idle threads (the AT_ONCE_S / SETTLE_S rule).

`FrozenTree.freeze` looks at every thread's state once (`_settles`: all of /proc/<pid>/task/*/stat read in
thread-creation order, then judged), then sends SIGSTOP, then waits until all are seen stopped; where the look
found every thread asleep and the stop came within AT_ONCE_S (2 ms) of the signal, the interval ends at "done".
The look has no bound of its own. SLEEPERS idle threads (futex waits, state S, created after the helper) make
it read ~SLEEPERS stat files after the helper's, ~8 us each: a window of ~1-2 ms between the moment the
helper was seen asleep and the SIGSTOP. The helper wakes on the judge's receive of "done" (EPOLLOUT edge on the
channel socket, as in round 13's g2), sleeps DELTA_US (asleep at its own read), then finishes the batch's last K
flips in user space and goes back to sleep before the signal: it is stopped at once, so the freeze is "at once"
and the interval ended at "done" without those K calls.

Verification calls (slot 0) are never deferred. Control: the same library with K = 0 (nothing deferred).
Usage: w1_look_window.py [K] [DELTA_US] [SLEEPERS] [ROWS]
"""
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESOLVER, config, run, shutdown, workspace  # noqa: E402

K = int(sys.argv[1]) if len(sys.argv) > 1 else 2
DELTA = int(sys.argv[2]) if len(sys.argv) > 2 else 400
SLEEPERS = int(sys.argv[3]) if len(sys.argv) > 3 else 150
ROWS, COLS = (int(sys.argv[4]) if len(sys.argv) > 4 else 256), 2048

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

MODEL_NEW = '''
import torch.nn as nn
import cpu_extension

class ModelNew(nn.Module):
    def forward(self, x):
        return cpu_extension.flip(x.contiguous())
'''

BINDING = '''
#include "binding_registry.h"
extern "C" void flip_kernel(const float* x, float* y, int64_t rows, int64_t cols);
at::Tensor flip_forward(const at::Tensor& x) {
  CHECK_CONTIGUOUS(x); CHECK_DTYPE(x, at::kFloat);
  auto y = at::empty_like(x);
  flip_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.size(0), x.size(1));
  return y;
}
REGISTER_BINDING(flip, flip_forward)
'''

KERNEL = RESOLVER + r'''
#include <atomic>
#include <cstdio>
struct TS { long s, ns; };
static long (*SC)(long, ...) = nullptr;
static int (*PC)(void*, const void*, void* (*)(void*), void*) = nullptr;  // pthread_create
struct Job { const float* x; float* y; int64_t rows, cols; };
static Job q[64]; static int qn = 0;
static std::atomic<int> busy{0};
static const float* slot0 = nullptr;
static const long K = K_VALUE, DELTA = DELTA_US_VALUE, SLEEPERS = SLEEPERS_VALUE;
static std::atomic<long> by_helper{0}, by_main{0}, helper_runs{0}, leftovers{0}, calls{0};
static int ep = -1; static int never = 0;

static void sleep_us(long us) { TS t{us / 1000000, (us % 1000000) * 1000}; SC(35, &t, nullptr); }
static void flip(const Job& j) {
  for (int64_t r = 0; r < j.rows; ++r) memcpy(j.y + r * j.cols, j.x + (j.rows - 1 - r) * j.cols, j.cols * sizeof(float));
}
static void lock() { int z = 0; while (!busy.compare_exchange_weak(z, 1)) z = 0; }
static void unlock() { busy.store(0); }

static void* helper(void*) {
  struct { unsigned int events; unsigned long data; } __attribute__((packed)) evs[8];
  for (;;) {
    SC(232, ep, evs, 8, -1);  // epoll_wait: the judge has just read our "done" (EPOLLOUT edge)
    if (DELTA) sleep_us(DELTA);  // asleep (S) when the judge's look reads this thread's state
    lock();
    int n = qn;
    for (int i = 0; i < n; ++i) flip(q[i]);
    qn = 0;
    unlock();
    if (n) { by_helper += n; helper_runs++; }
  }
  return nullptr;
}
static void* sleeper(void*) { for (;;) SC(202, &never, 0, 0, nullptr, nullptr, 0); return nullptr; }  // FUTEX_WAIT

__attribute__((constructor)) static void init() {
  SC = rt::sc();
  static const char n[] = {'p','t','h','r','e','a','d','_','c','r','e','a','t','e',0};
  PC = reinterpret_cast<int (*)(void*, const void*, void* (*)(void*), void*)>(rt::find(n));
  if (!K) return;
  SC(157, 29, 1000, 0, 0, 0);  // PR_SET_TIMERSLACK 1 us
  ep = (int)SC(291, 0);  // epoll_create1
  struct { unsigned long dev, ino, nlink; unsigned int mode, uid, gid, pad; unsigned long rdev; long size, blksize, blocks; long rest[9]; } st;
  for (int fd = 0; fd < 256; ++fd) if (SC(5, fd, &st) == 0 && (st.mode & 0170000) == 0140000) {
    struct { unsigned int events; unsigned long data; } __attribute__((packed)) ev{0x4u | (1u << 31), (unsigned long)fd};
    SC(233, ep, 1, fd, &ev);  // EPOLL_CTL_ADD, EPOLLOUT | EPOLLET
  }
  unsigned long th; PC(&th, nullptr, helper, nullptr);  // created first: read early in the look
  for (long i = 0; i < SLEEPERS; ++i) PC(&th, nullptr, sleeper, nullptr);
}

extern "C" void flip_kernel(const float* x, float* y, int64_t rows, int64_t cols) {
  Job j{x, y, rows, cols};
  if (!slot0) slot0 = x;
  long c = ++calls;
  if (c % 1000 == 0) { char b[200]; int k = snprintf(b, sizeof b, "w1: calls %ld by_helper %ld (runs %ld) by_main %ld leftovers %ld\n",
      c, by_helper.load(), helper_runs.load(), by_main.load(), leftovers.load()); SC(1, 2, b, k); }
  if (!K || x == slot0) {  // verification (slot 0 only) and the control: all work here
    lock();
    if (qn) { leftovers += qn; for (int i = 0; i < qn; ++i) flip(q[i]); qn = 0; }  // a helper that missed
    unlock();
    flip(j); by_main++;
    return;
  }
  lock();
  if (qn == K) { flip(q[0]); for (int i = 1; i < qn; ++i) q[i - 1] = q[i]; --qn; by_main++; }
  q[qn++] = j;  // the newest K calls of a batch stay pending: the helper finishes them after "done"
  unlock();
}
'''


def files(k: int) -> dict:
    src = KERNEL.replace("K_VALUE", str(k)).replace("DELTA_US_VALUE", str(DELTA)).replace("SLEEPERS_VALUE", str(SLEEPERS))
    return {"flip.cpp": src, "flip_binding.cpp": BINDING}


if __name__ == "__main__":
    which = sys.argv[5] if len(sys.argv) > 5 else "both"
    try:
        cfg = config(fast=False)
        if which in ("both", "control"):
            run("w1_look_window", f"control: K=0 (nothing deferred), rows {ROWS}", workspace("w1_control", MODEL_NEW, files(0), TASK),
                cfg, deserved="its own speed", log_chars=300)
        if which in ("both", "attack"):
            run("w1_look_window", f"attack: K={K} delta={DELTA}us sleepers={SLEEPERS} rows {ROWS}",
                workspace("w1_attack", MODEL_NEW, files(K), TASK), cfg,
                deserved="the control's reward (K calls per batch done after done, uncounted)", log_chars=400,
                k=K, delta_us=DELTA, sleepers=SLEEPERS)
    finally:
        shutdown()
