"""Many OpenMP threads (an honest relu run with num_threads(T)): the freeze's children-list walk
(/proc/PID/task/TID/children for each of T threads) at every freeze and watch; the verdict must stay
'correct' (reward 1, it is slower than eager), and nothing in the tree may escape.
usage: python drive_many_threads.py T [T ...]"""
import sys
from drive_common import run, RELU_MODEL_NEW, RELU_BINDING
KERNEL = '''
#include <cstdint>
extern "C" void relu_kernel(const float* x, float* y, int64_t n) {
  #pragma omp parallel for num_threads(%d) schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
'''
for T in map(int, sys.argv[1:] or ["1", "200", "900"]):
    run(f"relu with {T} OpenMP threads", None or __import__("drive_common").RELU_TASK, RELU_MODEL_NEW,
        {"relu.cpp": KERNEL % T, "relu_binding.cpp": RELU_BINDING}, budget=0.5, name="relu")
