"""H1: honest control for the laxer stop (FUTILE_FROM 8 / FUTILE_SHARE / FUTILE_CALLS): a fused kernel that is
really faster than eager (relu, *2, +1 in one pass vs three eager ops), evaluated N times with the shipped timing
defaults, optionally beside a CPU hog (argv[2] = 'hog': one core busy, as a loaded host). Any run that stops
early as 'not faster' and gets 1 is honest speed lost to the stop. Prints the rounds run."""
from common import *  # noqa
import multiprocessing as mp, sys, os, signal
TASK = '''
import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0 + 1.0
def get_inputs():
    return [torch.randn(256, 1024)]
def get_init_inputs():
    return []
'''
KERNEL = r'''
#include <cstdint>
extern "C" void relu_kernel(const float* x, float* y, int64_t n) {
  #pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) { float v = x[i] > 0.f ? x[i] : 0.f; y[i] = v * 2.0f + 1.0f; }
}
'''
def hog():
    while True: pass
if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    h = None
    if len(sys.argv) > 2 and sys.argv[2] == "hog":
        h = mp.Process(target=hog, daemon=True); h.start()
    w = ws("h1", kernel=KERNEL, task=TASK)
    try:
        for i in range(n):
            r = run(f"h1 honest fused {'hog' if h else 'idle'} #{i}", w, cfg())
            print("   rounds:", r.candidate_stats.trials if r.candidate_stats else None, "eager", r.eager_stats.model_dump() if r.eager_stats else None, "cand", r.candidate_stats.model_dump() if r.candidate_stats else None,
                  "interval:", r.speedup_interval, flush=True)
    finally:
        if h: os.kill(h.pid, signal.SIGKILL)
