"""a1: the stop is charged only to a client that was not idle at the judge's look (a timing bias).

`_CandidateSession.ends_at_stop` ends an interval at "done" where the client's threads were all asleep
or stopped at the look before the SIGSTOP and all stopped within AT_ONCE_S, else at the moment the judge
saw the client stopped (its /proc polling included). torch's eager runs on libgomp, whose workers
spin-wait after a parallel region (GOMP's default spin count): they are running ("R") at the look, so
eager's intervals carry the judge's stop polling. A candidate whose threads sleep at once never does.

Two candidates doing identical work on the main thread (a single-threaded ReLU): A also keeps one thread
that spins for 300 us after each call (as an OpenMP worker does), B keeps that thread asleep. Same judge,
back to back, twice. The difference in ms per call is what the judge's stop costs a client that spins.
With RT13_LOG set and bench/redteam/issue24_round13/shim first on PYTHONPATH (sitecustomize: logs every `ends_at_stop`), the log
shows the same charge on eager's side.
"""
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RELU_BINDING, RELU_MODEL_NEW, RELU_TASK, RESOLVER, config, run, shutdown, workspace  # noqa: E402

KERNEL = RESOLVER + r'''
#include <atomic>
struct TS { long s, ns; };
static long (*SC)(long, ...) = nullptr;
static std::atomic<long> last_return{0};
static long now_ns() { TS t; SC(228, 1, &t); return t.s * 1000000000L + t.ns; }
static void* spinner(void*) {
  for (;;) {
    long l = last_return.load();
    if (SPIN && l && now_ns() - l < 300000) continue;   // spin 300 us after a call, like a GOMP worker
    TS t{0, 50000}; SC(35, &t, nullptr);                  // else asleep
  }
  return nullptr;
}
__attribute__((constructor)) static void init() {
  SC = rt::sc();
  static const char n[] = {'p','t','h','r','e','a','d','_','c','r','e','a','t','e',0};
  auto pc = reinterpret_cast<int (*)(void*, const void*, void* (*)(void*), void*)>(rt::find(n));
  SC(157, 29, 1000, 0, 0, 0);
  unsigned long th; pc(&th, nullptr, spinner, nullptr);
}
extern "C" void relu_kernel(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
  last_return.store(now_ns());
}
'''


def files(spin: bool) -> dict:
    return {"relu.cpp": KERNEL.replace("SPIN &&", "1 &&" if spin else "0 &&"), "relu_binding.cpp": RELU_BINDING}


if __name__ == "__main__":
    try:
        cfg = config(fast=False)
        for rep in range(2):
            run("a1_stop_charged_by_spin", f"A: same work + a thread spinning 300 us after calls (rep {rep})",
                workspace(f"a1_spin{rep}", RELU_MODEL_NEW, files(True)), cfg, deserved="= B's speed")
            run("a1_stop_charged_by_spin", f"B: same work, helper thread asleep (rep {rep})",
                workspace(f"a1_idle{rep}", RELU_MODEL_NEW, files(False)), cfg, deserved="= A's speed")
    finally:
        shutdown()
