"""e2 (round 21, mirror): a task that declares a float input fixed in part (ALiBi's distances, fixed, with key
padding of random lengths per batch as -inf in the same additive bias: FIXED_INPUTS = [1]). docs/guards.md: declared
inputs are the task's "wholly or in part, like its weights, and a kernel may assume them"; only one "the same in
every draw" is a constant (`TaskState.constants`), so this one is scaled like any float in the secret trial and in
every timed round: its fixed part is no longer what the task made. A kernel that assumes the declared ALiBi part
(computes -slope*|i-j| itself, reads the bias only for the padding) is judged against one that reads it all.
Run: cd /work/main && .venv/bin/python bench/redteam/issue24_round21/e2_declared_part_scaled.py [reads|assumes|all]
"""
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import config, run, shutdown, workspace  # noqa: E402

TASK = '''
import torch
import torch.nn as nn

B, H, S = 4, 8, 256
SLOPES = (2.0 ** (-8.0 * torch.arange(1, H + 1) / H))[:, None, None]

class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, scores, bias):
        return torch.softmax(scores + bias, dim=-1)

def get_inputs():
    lengths = torch.randint(S // 2, S + 1, (B,))       # key padding: random per batch
    i = torch.arange(S)
    bias = -(SLOPES * (i[:, None] - i[None, :]).abs().float()).expand(B, H, S, S).clone()  # ALiBi: fixed
    bias.masked_fill_((i[None, :] >= lengths[:, None])[:, None, None, :], float("-inf"))
    return [torch.randn(B, H, S, S), bias]

FIXED_INPUTS = [1]  # ALiBi's distances are the task's (the padding moves)

def get_init_inputs():
    return []
'''

MODEL_NEW = '''
import torch.nn as nn
import cpu_extension

class ModelNew(nn.Module):
    def forward(self, scores, bias):
        return cpu_extension.alibi_softmax(scores.contiguous(), bias.contiguous())
'''

BINDING = '''
#include "binding_registry.h"
extern "C" void asm_kernel(const float* s, const float* b, float* y, int64_t bh, int64_t h, int64_t n);
at::Tensor asm_forward(const at::Tensor& s, const at::Tensor& b) {
  CHECK_CONTIGUOUS(s); CHECK_CONTIGUOUS(b);
  auto y = at::empty_like(s);
  asm_kernel(s.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(), s.size(0) * s.size(1), s.size(1), s.size(3));
  return y;
}
REGISTER_BINDING(alibi_softmax, asm_forward)
'''

KERNEL = '''
#include <cstdint>
#include <cmath>
extern "C" void asm_kernel(const float* s, const float* b, float* y, int64_t bh, int64_t h, int64_t n) {
  #pragma omp parallel for
  for (int64_t r = 0; r < bh * n; ++r) {
    const int64_t head = (r / n) % h, i = r % n;
    const float slope = powf(2.0f, -8.0f * (float)(head + 1) / (float)h);
    const float* sr = s + r * n; const float* br = b + r * n; float* yr = y + r * n;
    float mx = -INFINITY;
    for (int64_t j = 0; j < n; ++j) {
      float bias = ASSUME ? (std::isinf(br[j]) ? br[j] : -slope * (float)(i > j ? i - j : j - i)) : br[j];
      float v = sr[j] + bias; yr[j] = v; mx = v > mx ? v : mx; }
    float sum = 0.f;
    for (int64_t j = 0; j < n; ++j) { float e = expf(yr[j] - mx); yr[j] = e; sum += e; }
    for (int64_t j = 0; j < n; ++j) yr[j] /= sum;
  }
}
'''


def main(which: str) -> None:
    cfg = config()
    kinds = ["reads", "assumes"] if which == "all" else [which]
    for kind in kinds:
        src = KERNEL.replace("ASSUME", "1" if kind == "assumes" else "0")
        ws = workspace(f"e2_{kind}", MODEL_NEW, {"asm.cpp": src, "asm_binding.cpp": BINDING}, TASK)
        run("e2_declared_part_scaled", kind, ws, cfg,
            deserved="same as reads (the declared ALiBi part is the task's, a kernel may assume it)")
    shutdown()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "all")
