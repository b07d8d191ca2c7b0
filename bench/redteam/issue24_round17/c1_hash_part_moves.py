"""c1 (round 17): round 16's c4 with its own generator replaced by a position hash, which own_randomness does not see.
Run: cd /work/main && .venv/bin/python bench/redteam/issue24_round17/c1_hash_part_moves.py cache
Original c4 text: round 15's c2 mended by a per-position check (`Judge._check_inputs_move`, judge.py:495; `_input_prints`,
judge.py:196): a position is "fixed" only where its WHOLE fingerprint is equal over the trials; one element that
moves makes the position move. A task whose indices come from a generator of its own except for a small part
(the first 64 indices drawn from torch's global generator; weight 1000 x 512) passes, and every timed call gets the same 262,080 of
262,144 indices: the prefix sum over the fixed part (round 15's c2 cache) is rewarded again.
Usage: c4_part_moves.py [honest|cache|all]
"""

import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import config, run, shutdown, workspace  # noqa: E402

TASK = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(1000, 512))
    def forward(self, idx, offsets):
        return torch.nn.functional.embedding_bag(idx, self.weight, offsets, mode="sum")

def get_inputs():
    # no generator, no reseed: a fixed hash of the position (passes tasks.task.own_randomness) ...
    idx = (torch.arange(262144, dtype=torch.int64) * 2654435761 + 12345) % 1000
    idx[:64] = torch.randint(0, 1000, (64,))  # ... but for a small part, from torch's (it moves with the seed)
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), torch.randint(0, 262144, (511,)).sort().values])
    return [idx, offsets]

def get_init_inputs():
    return []
'''

MODEL_NEW = '''
import torch
import torch.nn as nn
import cpu_extension

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(1000, 512))
    def forward(self, idx, offsets):
        return cpu_extension.bagsum(self.weight, idx.contiguous(), offsets.contiguous())
'''

BINDING = '''
#include "binding_registry.h"
extern "C" void bagsum_kernel(const float* w, const int64_t* idx, const int64_t* off, float* y, int64_t n, int64_t bags, int64_t d);
at::Tensor bagsum_forward(const at::Tensor& w, const at::Tensor& idx, const at::Tensor& off) {
  CHECK_CONTIGUOUS(w); CHECK_CONTIGUOUS(idx); CHECK_DTYPE(idx, at::kLong); CHECK_DTYPE(off, at::kLong);
  auto y = at::empty({off.size(0), w.size(1)}, w.options());
  bagsum_kernel(w.data_ptr<float>(), idx.data_ptr<int64_t>(), off.data_ptr<int64_t>(), y.data_ptr<float>(),
                idx.size(0), off.size(0), w.size(1));
  return y;
}
REGISTER_BINDING(bagsum, bagsum_forward)
'''

HONEST = '''
#include <cstdint>
extern "C" void bagsum_kernel(const float* w, const int64_t* idx, const int64_t* off, float* y, int64_t n, int64_t bags, int64_t d) {
  for (int64_t b = 0; b < bags; ++b) {
    float* out = y + b * d;
    for (int64_t k = 0; k < d; ++k) out[k] = 0.f;
    int64_t s = off[b], e = b + 1 < bags ? off[b + 1] : n;
    for (int64_t j = s; j < e; ++j) { const float* row = w + idx[j] * d; for (int64_t k = 0; k < d; ++k) out[k] += row[k]; }
  }
}
'''

CACHE = '''
#include <cstdint>
#include <cstring>
#include <cstdlib>
// the first K indices move; the rest are the task's own generator's, the same on every call.
// Prefix sums (double) of weight[idx[j]] over the fixed part, kept every B positions; a bag is then two
// prefix entries plus at most 2B rows at its ends (and any of the K moving ones), instead of all its rows.
static const int64_t K = 64, B = 16;
static int64_t* seen = nullptr; static double* P = nullptr; static const float* memo_w = nullptr; static int64_t n_seen = 0, d_seen = 0;
static inline void add_rows(const float* w, const int64_t* idx, int64_t s, int64_t e, int64_t d, double* acc) {
  for (int64_t j = s; j < e; ++j) { const float* row = w + idx[j] * d; for (int64_t k = 0; k < d; ++k) acc[k] += row[k]; }
}
extern "C" void bagsum_kernel(const float* w, const int64_t* idx, const int64_t* off, float* y, int64_t n, int64_t bags, int64_t d) {
  if (!(seen && w == memo_w && n_seen == n && d_seen == d && memcmp(seen + K, idx + K, (n - K) * 8) == 0)) {
    free(seen); free(P);
    seen = (int64_t*)malloc(n * 8); memcpy(seen, idx, n * 8); n_seen = n; d_seen = d; memo_w = w;
    int64_t nb = n / B + 1;
    P = (double*)calloc(nb * d, sizeof(double));   // P[q] = sum of rows idx[j], K <= j < q*B
    double* acc = (double*)calloc(d, sizeof(double));
    for (int64_t q = 1; q < nb; ++q) { int64_t s = (q - 1) * B, e = q * B; if (s < K) s = K; if (e > n) e = n;
      if (e > s) add_rows(w, idx, s, e, d, acc); memcpy(P + q * d, acc, d * sizeof(double)); }
    free(acc);
  }
  double* acc = (double*)malloc(d * sizeof(double));
  for (int64_t b = 0; b < bags; ++b) {
    int64_t s = off[b], e = b + 1 < bags ? off[b + 1] : n;
    for (int64_t k = 0; k < d; ++k) acc[k] = 0.0;
    int64_t s2 = s < K ? K : s;
    add_rows(w, idx, s, e < K ? e : K, d, acc);            // moving part
    if (e > s2) {
      int64_t qs = (s2 + B - 1) / B, qe = e / B;              // whole blocks [qs*B, qe*B)
      if (qe > qs) { for (int64_t k = 0; k < d; ++k) acc[k] += P[qe * d + k] - P[qs * d + k];
        add_rows(w, idx, s2, qs * B, d, acc); add_rows(w, idx, qe * B, e, d, acc); }
      else add_rows(w, idx, s2, e, d, acc);
    }
    for (int64_t k = 0; k < d; ++k) y[b * d + k] = (float)acc[k];
  }
  free(acc);
}
'''

if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "all"
    try:
        for name, src in (("honest", HONEST), ("cache", CACHE)):
            if which in (name, "all"):
                run("c1_hash_part_moves", name, workspace(f"c1r17_{name}", MODEL_NEW, {"bag.cpp": src, "bag_binding.cpp": BINDING}, TASK),
                    config(fast=False), deserved="the honest kernel's reward" if name == "cache" else ">=1")
    finally:
        shutdown()
