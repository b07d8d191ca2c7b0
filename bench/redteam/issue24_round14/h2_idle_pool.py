"""h2: an honest kernel whose library keeps a large idle OpenMP pool is charged the judge's /proc polling.

`FrozenTree.freeze` (candidate_link.py:240) grants "stopped at once" (the interval ends at "done") only where
the tree was seen stopped within AT_ONCE_S (2 ms) of the SIGSTOP; seeing it stopped means reading
/proc/<pid>/task/*/stat for every thread (~8 us each here) after every thread has taken the stop. With ~150 idle
threads the wait alone is 2-5 ms, so an idle, honest client is "not at once" and its interval runs on to the
judge's "seen stopped": the judge's own polling is charged to it (the docstring of `ends_at_stop` says the
polling "is no client's time"). The baseline client's pool is torch's (2 threads here), so the charge is one-sided.
Honest flip (same code) with POOL idle OpenMP workers started at load (`omp parallel num_threads(POOL)` once;
GOMP_SPINCOUNT=0 keeps them asleep). Usage: h2_idle_pool.py POOL [POOL ...]
"""
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import config, run, shutdown, workspace  # noqa: E402
from w1_look_window import BINDING, MODEL_NEW, TASK  # noqa: E402  (flip of 256 x 2048 floats)

KERNEL = r'''
#include <cstdint>
#include <cstring>
#include <omp.h>
__attribute__((constructor)) static void init() {
  if (POOL_VALUE > 1) {
    #pragma omp parallel num_threads(POOL_VALUE)
    { (void)omp_get_thread_num(); }  // start the pool once: its workers then sleep until the next region
  }
}
extern "C" void flip_kernel(const float* x, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) memcpy(y + r * cols, x + (rows - 1 - r) * cols, cols * sizeof(float));
}
'''

if __name__ == "__main__":
    try:
        for pool in [int(a) for a in sys.argv[1:]] or [0, 150]:
            run("h2_idle_pool", f"honest flip, idle OpenMP pool of {pool}",
                workspace(f"h2_{pool}", MODEL_NEW, {"flip.cpp": KERNEL.replace("POOL_VALUE", str(pool)), "flip_binding.cpp": BINDING}, TASK),
                config(fast=False), deserved="the same as pool 0 (same work)", pool=pool)
    finally:
        shutdown()
