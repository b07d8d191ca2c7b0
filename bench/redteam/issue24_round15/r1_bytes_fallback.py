"""r1: the aliasing check's byte-by-byte fallback (`_really_overlap`, judge.py:2060-2086) is still the candidate's
to choose. `_between_each_other` (judge.py:2089) proves two strided outputs apart only where the gcd of their
strides leaves room; two padded layouts whose row strides differ by one element (C+1 and C+2 floats: gcd 4 bytes)
always fall to the bytes, and the bytes path builds an int64 per output BYTE (`every`, with temporaries: ~24-32x
the output) in the judge's memory, before any verdict. The layouts pass `check_layouts` (padding < 2x).
Task: forward(x) -> (relu(x), relu(-x)), x (R, C). attack: both outputs as padded views of one buffer, row strides
C+1 and C+2 (they overlap: the verdict is -1 either way; the point is what the judge pays first). control: two
honest outputs. Prints the judge process's peak RSS (VmHWM) and the evaluation's seconds.
Usage: r1_bytes_fallback.py [control|attack|both] [R C]
"""
import os
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import config, run, shutdown, workspace  # noqa: E402

WHICH = sys.argv[1] if len(sys.argv) > 1 else "both"
R, C = (int(sys.argv[2]), int(sys.argv[3])) if len(sys.argv) > 3 else (2048, 4096)
TASK = f'''
import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        return torch.relu(x), torch.relu(-x)
def get_inputs():
    return [torch.randn({R}, {C})]
def get_init_inputs():
    return []
'''
MODEL_NEW = '''
import torch.nn as nn
import cpu_extension
class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        return cpu_extension.first(x), cpu_extension.second(x)
'''
BINDING = '''
#include "binding_registry.h"
at::Tensor pos(const at::Tensor& x, at::Tensor y, int sign) {
  const float* s = x.data_ptr<float>(); float* d = y.data_ptr<float>();
  int64_t r = x.size(0), c = x.size(1), ld = y.stride(0);
  #pragma omp parallel for
  for (int64_t i = 0; i < r; ++i) for (int64_t j = 0; j < c; ++j) { float v = sign * s[i * c + j]; d[i * ld + j] = v > 0.f ? v : 0.f; }
  return y;
}
static at::Tensor buf;
at::Tensor first(const at::Tensor& x) {
  CHECK_CONTIGUOUS(x); CHECK_DTYPE(x, at::kFloat);
  int64_t r = x.size(0), c = x.size(1);
#if ATTACK
  buf = at::empty({2 * r * (c + 2) + c}, x.options());
  return pos(x, buf.as_strided({r, c}, {c + 1, 1}, 0), 1);
#else
  return pos(x, at::empty({r, c}, x.options()), 1);
#endif
}
at::Tensor second(const at::Tensor& x) {
  int64_t r = x.size(0), c = x.size(1);
#if ATTACK
  return pos(x, buf.as_strided({r, c}, {c + 2, 1}, c), -1);   // row strides C+1, C+2: gcd 4 bytes, the bytes decide
#else
  return pos(x, at::empty({r, c}, x.options()), -1);
#endif
}
REGISTER_BINDING(first, first)
REGISTER_BINDING(second, second)
'''


def judge_hwm() -> str:
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read()
            if b"cuda_agent.evaluation.judge" in cmd and os.getppid() != int(pid):
                st = open(f"/proc/{pid}/status").read()
                hwm = [ln for ln in st.splitlines() if ln.startswith(("VmHWM", "VmRSS"))]
                return f"judge {pid}: " + ", ".join(" ".join(h.split()) for h in hwm)
        except OSError:
            continue
    return "judge not found"


if __name__ == "__main__":
    try:
        for name in ("control", "attack"):
            if WHICH in (name, "both"):
                binding = ("#define ATTACK 1\n" if name == "attack" else "#define ATTACK 0\n") + BINDING
                before = judge_hwm()
                print("before:", before, flush=True)
                row = run("r1_bytes_fallback", f"{name} {R}x{C}", workspace(f"r1_{name}", MODEL_NEW, {"two_binding.cpp": binding}, TASK),
                          config(fast=False), deserved="-1 (overlapping outputs), at no great cost to the judge" if name == "attack" else ">=1",
                          )
                after = judge_hwm()
                print("after:", after, flush=True)
                with open(Path(__file__).resolve().parent / "results.jsonl", "a") as fh:
                    fh.write(__import__("json").dumps({"repro": "r1_bytes_fallback", "label": f"{name} {R}x{C} judge memory",
                                                         "judge_before_after": [before, after]}) + "\n")
    finally:
        shutdown()
