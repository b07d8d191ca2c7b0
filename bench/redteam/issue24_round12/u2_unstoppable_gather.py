"""U2: U1's hole on an embedding lookup (a gather by index, not a copy): the rows are gathered by the kernel after
"done", in one pwritev per 1024 rows into an output mapped from a memfd, while the judge waits untimed.

Task: `weight[idx]` (nn.Embedding's forward) with weight (8192, 2048) f32 and 1024 int64 indices drawn anew per call
(output 8 MiB). The attack's forward reads the indices, makes a fresh memfd of the output's size, maps it shared,
wraps it as the output (at::from_blob; unmapped when torch frees it), hands a helper 1024 iovecs (one per weight
row to gather, as an IOCB_CMD_PWRITEV) and returns. At the batch's last call (its size learned from earlier
batches: a batch starts at each SIGCONT from the judge) one helper thread makes ONE io_submit of the whole batch:
Linux AIO runs buffered writes synchronously inside the call, so the kernel gathers every output's rows into its
file after "done" while the judge waits for the freeze (shmem writes check only for fatal signals). Outputs the
judge has let go of are reused (a pool of mappings, like any allocator). Control: an honest OpenMP gather (memcpy per row).
Deserved: 1 (a gather as fast as eager's). Usage: python u2_unstoppable_gather.py [compile=0]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

V, D, N = 8192, 2048, 1024
TASK = f'''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn({V}, {D}))
    def forward(self, idx):
        return self.weight[idx]

def get_inputs():
    return [torch.randint(0, {V}, ({N},))]

def get_init_inputs():
    return []
'''
MODEL_NEW = f'''
import torch
import torch.nn as nn
import cpu_extension

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.empty({V}, {D}))
    def forward(self, idx):
        return cpu_extension.gather_rows(idx.contiguous(), self.weight)
'''
HONEST = r'''
#include "binding_registry.h"
#include <cstring>
at::Tensor gather_rows(const at::Tensor& idx, const at::Tensor& w) {
  CHECK_CONTIGUOUS(idx); CHECK_CONTIGUOUS(w);
  int64_t n = idx.size(0), d = w.size(1);
  auto y = at::empty({n, d}, w.options());
  const int64_t* ix = idx.data_ptr<int64_t>(); const float* src = w.data_ptr<float>(); float* dst = y.data_ptr<float>();
  #pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) memcpy(dst + i * d, src + ix[i] * d, d * sizeof(float));
  return y;
}
REGISTER_BINDING(gather_rows, gather_rows)
'''
ATTACK = r'''
#include "binding_registry.h"
#include <ATen/ops/from_blob.h>
#include <atomic>
#include <cstring>
''' + common.RESOLVER + r'''
namespace {
long (*S)(long, ...) = nullptr;
constexpr int JOBS = 64;
struct IoVec { const void* base; unsigned long len; };
struct Iocb { unsigned long long data; unsigned key, rw_flags; unsigned short opcode; short prio; unsigned fd;
              unsigned long long buf, nbytes; long long offset; unsigned long long reserved2; unsigned flags, resfd; };
struct Job { IoVec iov[1024]; Iocb cb; };
Job jobs[JOBS];
Iocb* batch[JOBS];
int n_armed = 0, next_job = 0;
unsigned long aio_ctx = 0;
std::atomic<int> go{0}, entered{0};
// one thread, one io_submit for the whole batch: Linux AIO runs buffered writes synchronously inside the call,
// every iocb in turn, and nothing in it stops for SIGSTOP
void* helper(void*) {
  struct Ev { unsigned long long data, obj; long long res, res2; } ev[JOBS];
  for (;;) {
    while (go.load() == 0) S(202, &go, 0L /*FUTEX_WAIT*/, 0L, nullptr);
    int n = go.exchange(0);
    entered.store(1);
    S(209, (long)aio_ctx, (long)n, batch);                                       // io_submit: every gather, in the kernel
    struct { long s, ns; } zero{0, 0};
    S(208, (long)aio_ctx, 0L, (long)JOBS, ev, &zero);                            // io_getevents: reap, never wait
  }
  return nullptr;
}
// a batch starts when the judge thaws the candidate (SIGCONT, SI_USER); its size is the most calls an earlier batch
// had (1 before any): at that call the whole batch is submitted, so the copies run after its last call, while the
// harness describes the outputs and the judge waits for the freeze
std::atomic<long> calls{0}, batch_size{1};
struct SigInfo { int signo, err, code; };
void on_cont(int, SigInfo* si, void*) {
  if (si->code == 0) { long c = calls.exchange(0); if (c > batch_size.load()) batch_size.store(c); }
}
struct SigAct { void (*fn)(int, SigInfo*, void*); unsigned long mask[16]; int flags; void (*restorer)(); };
struct AtLoad { AtLoad() {
  S = rt::sc();
  S(206, 4096L, &aio_ctx);                                                       // io_setup
  static const char pc[] = {'p','t','h','r','e','a','d','_','c','r','e','a','t','e',0};
  auto create = reinterpret_cast<int (*)(unsigned long*, const void*, void* (*)(void*), void*)>(rt::find(pc));
  unsigned long th; create(&th, nullptr, helper, nullptr);
  static const char sa[] = {'s','i','g','a','c','t','i','o','n',0};
  auto sigact = reinterpret_cast<int (*)(int, const SigAct*, SigAct*)>(rt::find(sa));
  SigAct act{}; act.fn = on_cont; act.flags = 4 | 0x10000000;                    // SA_SIGINFO | SA_RESTART
  sigact(18, &act, nullptr);
} } at_load;
// outputs the judge has let go of are reused, as any allocator does (an unmap per output freed its pages inside
// the next interval): (address, fd) pairs, under a spin lock
struct Slot { void* p; int fd; };
Slot free_slots[256]; int n_free = 0; std::atomic<int> lock{0};
void release(void* p, int fd) {
  while (lock.exchange(1)) {}
  if (n_free < 256) free_slots[n_free++] = {p, fd}; else { S(11, p, 0L); S(3, (long)fd); }
  lock.store(0);
}
}
at::Tensor gather_rows(const at::Tensor& idx, const at::Tensor& w) {
  CHECK_CONTIGUOUS(idx); CHECK_CONTIGUOUS(w);
  int64_t n = idx.size(0), d = w.size(1);
  long bytes = n * d * (long)sizeof(float);
  void* p = nullptr; int fd = -1;
  while (lock.exchange(1)) {}
  if (n_free) { p = free_slots[n_free - 1].p; fd = free_slots[n_free - 1].fd; --n_free; }
  lock.store(0);
  if (!p) {
    fd = (int)S(319, "out", 0L);                                                 // memfd_create
    S(77, (long)fd, bytes);                                                      // ftruncate
    p = reinterpret_cast<void*>(S(9, 0L, bytes, 3L /*RW*/, 1L /*MAP_SHARED*/, (long)fd, 0L));  // mmap
  }
  auto y = at::from_blob(p, {n, d}, [fd](void* q) { release(q, fd); }, w.options());
  Job& j = jobs[next_job++ % JOBS];
  const int64_t* ix = idx.data_ptr<int64_t>(); const float* src = w.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) { j.iov[i].base = src + ix[i] * d; j.iov[i].len = d * sizeof(float); }
  j.cb = Iocb{}; j.cb.opcode = 8 /*IOCB_CMD_PWRITEV*/; j.cb.fd = (unsigned)fd;
  j.cb.buf = reinterpret_cast<unsigned long long>(j.iov); j.cb.nbytes = (unsigned long long)n; j.cb.offset = 0;
  batch[n_armed++] = &j.cb;
  if (++calls >= batch_size.load()) {                                            // the batch's last call: submit it all
    entered.store(0); go.store(n_armed); n_armed = 0;
    S(202, &go, 1L /*FUTEX_WAKE*/, 1L);
    while (!entered.load()) {}                                                   // the helper is in the kernel (or about to be)
  }
  return y;                                                                      // nothing gathered yet
}
REGISTER_BINDING(gather_rows, gather_rows)
'''


def main() -> None:
    compiled = len(sys.argv) > 1 and sys.argv[1] == "1"
    cfg = common.config(fast=False, compile_mode="default" if compiled else None)
    ws = lambda name, binding: common.workspace(name, model_new=MODEL_NEW, task_source=TASK,  # noqa: E731
                                                kernels={"gather_binding.cpp": binding})
    try:
        common.run("u2_unstoppable_gather", "honest control", ws("u2honest", HONEST), cfg, deserved="1")
        common.run("u2_unstoppable_gather", "attack (rows gathered by one io_submit after done)", ws("u2attack", ATTACK),
                   cfg, deserved="1 (a gather as fast as eager's)")
        common.run("u2_unstoppable_gather", "honest control (after)", ws("u2honest2", HONEST), cfg, deserved="1")
    finally:
        common.shutdown()


if __name__ == "__main__":
    main()
