"""e1 (round 21): an undeclared task whose outputs depend on structure inputs only (HF's LlamaRotaryEmbedding:
forward(x, position_ids) -> cos, sin; x only gives the dtype, position_ids = arange rows, structure by shape).
The load check asks inputs to move, and the outputs are checked for moving only where the task declares
FIXED_INPUTS (the same task with `FIXED_INPUTS = [1]` is refused: cases.py U2). Undeclared, every call's output is
the same table: a kernel that computed it once and copies it is judged against one that computes it.
Run: cd /work/main && .venv/bin/python bench/redteam/issue24_round21/e1_rotary_cache.py [honest|cache|all]
"""
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import config, run, shutdown, workspace  # noqa: E402

TASK = '''
import torch
import torch.nn as nn

B, S, D = 8, 2048, 128

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, D, 2).float() / D)))
    def forward(self, x, position_ids):
        freqs = (self.inv_freq[None, :, None] @ position_ids[:, None, :].float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

def get_inputs():
    return [torch.randn(B, S, D), torch.arange(S).expand(B, S).contiguous()]

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
        self.register_buffer("inv_freq", torch.empty(64))
    def forward(self, x, position_ids):
        return cpu_extension.rope(x, position_ids.contiguous(), self.inv_freq.contiguous(), 0), \\
            cpu_extension.rope(x, position_ids.contiguous(), self.inv_freq.contiguous(), 1)
'''

BINDING = '''
#include "binding_registry.h"
extern "C" void rope_kernel(const int64_t* pos, const float* inv, float* y, int64_t b, int64_t s, int64_t d, int64_t which);
at::Tensor rope_forward(const at::Tensor& x, const at::Tensor& pos, const at::Tensor& inv, int64_t which) {
  CHECK_CONTIGUOUS(pos); CHECK_CONTIGUOUS(inv);
  auto y = at::empty({pos.size(0), pos.size(1), 2 * inv.size(0)}, x.options());
  rope_kernel(pos.data_ptr<int64_t>(), inv.data_ptr<float>(), y.data_ptr<float>(), pos.size(0), pos.size(1),
              2 * inv.size(0), which);
  return y;
}
REGISTER_BINDING(rope, rope_forward)
'''

HONEST = '''
#include <cstdint>
#include <cmath>
extern "C" void rope_kernel(const int64_t* pos, const float* inv, float* y, int64_t b, int64_t s, int64_t d, int64_t which) {
  const int64_t h = d / 2;
  #pragma omp parallel for
  for (int64_t r = 0; r < b * s; ++r) {
    const float p = (float)pos[r];
    float* o = y + r * d;
    for (int64_t k = 0; k < h; ++k) { float f = inv[k] * p; float v = which ? sinf(f) : cosf(f); o[k] = v; o[k + h] = v; }
  }
}
'''

CACHE = '''
#include <cstdint>
#include <cmath>
#include <cstdlib>
#include <cstring>
// the table is the same on every call (positions are arange rows): computed on the first call, copied after
static float* table[2] = {nullptr, nullptr}; static int64_t seen[2] = {-1, -1};
extern "C" void rope_kernel(const int64_t* pos, const float* inv, float* y, int64_t b, int64_t s, int64_t d, int64_t which) {
  const int64_t n = b * s * d;
  if (!table[which] || seen[which] != n) {
    free(table[which]); table[which] = (float*)malloc(n * sizeof(float)); seen[which] = n;
    const int64_t h = d / 2;
    for (int64_t r = 0; r < b * s; ++r) {
      const float p = (float)pos[r]; float* o = table[which] + r * d;
      for (int64_t k = 0; k < h; ++k) { float f = inv[k] * p; float v = which ? sinf(f) : cosf(f); o[k] = v; o[k + h] = v; }
    }
  }
  #pragma omp parallel for
  for (int64_t c = 0; c < 16; ++c) { int64_t lo = n * c / 16, hi = n * (c + 1) / 16;
    memcpy(y + lo, table[which] + lo, (hi - lo) * sizeof(float)); }
}
'''


def main(which: str) -> None:
    cfg = config()
    kinds = ["honest", "cache"] if which == "all" else [which]
    for kind in kinds:
        ws = workspace(f"e1_{kind}", MODEL_NEW, {"rope.cpp": HONEST if kind == "honest" else CACHE,
                                                "rope_binding.cpp": BINDING}, TASK)
        run("e1_rotary_cache", kind, ws, cfg, deserved="1 (cache: the table is the task's output, copied not computed)")
    shutdown()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "all")
