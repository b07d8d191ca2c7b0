"""h1: honest, correct kernels with unusual but legitimate properties (the mirror failure: a guard firing on
honest code). Each case is one task + one honest C++ kernel; every guard on, CPU backend.

cases:
  empty      - a zero-size input and output (64 x 0) beside a normal one: forward returns (relu(a), relu(b))
  inplace    - the task itself works in place: x.relu_(); return x  (reference mutates and aliases its input)
  infmask    - float input holding +-inf and -0.0, and a bool mask of ODD element count (63 x 1023): where(m, x, -x)
  int8       - int8 input of odd numel, output int16 sum of pairs (integer inputs drawn anew per call)
  scalar     - a 0-dim output: x.sum() (a reduction to a scalar)
Usage: python h1_honest_battery.py CASE[:verify] [CASE ...]   (":verify": measure=False, no baseline client)
"""
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import config, run, shutdown, workspace  # noqa: E402

HDR = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
'''
CASES = {}

# ---- empty -------------------------------------------------------------------------------------
CASES["empty"] = dict(
    task=HDR + '''
    def forward(self, a, b):
        return torch.relu(a), torch.relu(b)

def get_inputs():
    return [torch.randn(64, 0), torch.randn(64, 1024)]

def get_init_inputs():
    return []
''',
    model_new='''
import torch.nn as nn
import cpu_extension

class ModelNew(nn.Module):
    def forward(self, a, b):
        return cpu_extension.relu(a.contiguous()), cpu_extension.relu(b.contiguous())
''',
    binding='''
#include "binding_registry.h"
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
at::Tensor relu_forward(const at::Tensor& x) {
  CHECK_CONTIGUOUS(x); CHECK_DTYPE(x, at::kFloat);
  auto y = at::empty_like(x);
  if (x.numel()) relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}
REGISTER_BINDING(relu, relu_forward)
''',
    kernel='''
#include <cstdint>
extern "C" void relu_kernel(const float* x, float* y, int64_t n) {
  #pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
''')

# ---- inplace -----------------------------------------------------------------------------------
CASES["inplace"] = dict(
    task=HDR + '''
    def forward(self, x):
        x.relu_()
        return x

def get_inputs():
    return [torch.randn(256, 1024)]

def get_init_inputs():
    return []
''',
    model_new='''
import torch.nn as nn
import cpu_extension

class ModelNew(nn.Module):
    def forward(self, x):
        return cpu_extension.relu_(x)
''',
    binding='''
#include "binding_registry.h"
extern "C" void relu_kernel(float* x, int64_t n);
at::Tensor relu_forward(at::Tensor x) {
  CHECK_CONTIGUOUS(x); CHECK_DTYPE(x, at::kFloat);
  relu_kernel(x.data_ptr<float>(), x.numel());
  return x;
}
REGISTER_BINDING(relu_, relu_forward)
''',
    kernel='''
#include <cstdint>
extern "C" void relu_kernel(float* x, int64_t n) {
  #pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] > 0.f ? x[i] : 0.f;
}
''')

# ---- infmask -----------------------------------------------------------------------------------
CASES["infmask"] = dict(
    task=HDR + '''
    def forward(self, x, m):
        return torch.where(m, x, -x)

def get_inputs():
    x = torch.randn(63, 1023)
    x[:, ::5] = float("inf")
    x[:, 1::5] = float("-inf")
    x[:, 2::5] = -0.0
    m = torch.rand(63, 1023) > 0.5
    return [x, m]

def get_init_inputs():
    return []
''',
    model_new='''
import torch.nn as nn
import cpu_extension

class ModelNew(nn.Module):
    def forward(self, x, m):
        return cpu_extension.wherefl(x.contiguous(), m.contiguous())
''',
    binding='''
#include "binding_registry.h"
extern "C" void where_kernel(const float* x, const bool* m, float* y, int64_t n);
at::Tensor where_forward(const at::Tensor& x, const at::Tensor& m) {
  CHECK_CONTIGUOUS(x); CHECK_DTYPE(x, at::kFloat); CHECK_DTYPE(m, at::kBool);
  auto y = at::empty_like(x);
  where_kernel(x.data_ptr<float>(), m.data_ptr<bool>(), y.data_ptr<float>(), x.numel());
  return y;
}
REGISTER_BINDING(wherefl, where_forward)
''',
    kernel='''
#include <cstdint>
extern "C" void where_kernel(const float* x, const bool* m, float* y, int64_t n) {
  #pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) y[i] = m[i] ? x[i] : -x[i];
}
''')

# ---- int8 --------------------------------------------------------------------------------------
CASES["int8"] = dict(
    task=HDR + '''
    def forward(self, a, b):
        return a.to(torch.int16) + b.to(torch.int16)

def get_inputs():
    return [torch.randint(-128, 128, (1023, 1001), dtype=torch.int8),
            torch.randint(-128, 128, (1023, 1001), dtype=torch.int8)]

def get_init_inputs():
    return []
''',
    model_new='''
import torch.nn as nn
import cpu_extension

class ModelNew(nn.Module):
    def forward(self, a, b):
        return cpu_extension.add16(a.contiguous(), b.contiguous())
''',
    binding='''
#include "binding_registry.h"
extern "C" void add_kernel(const int8_t* a, const int8_t* b, int16_t* y, int64_t n);
at::Tensor add_forward(const at::Tensor& a, const at::Tensor& b) {
  CHECK_CONTIGUOUS(a); CHECK_DTYPE(a, at::kChar);
  auto y = at::empty(a.sizes(), a.options().dtype(at::kShort));
  add_kernel(a.data_ptr<int8_t>(), b.data_ptr<int8_t>(), y.data_ptr<int16_t>(), a.numel());
  return y;
}
REGISTER_BINDING(add16, add_forward)
''',
    kernel='''
#include <cstdint>
extern "C" void add_kernel(const int8_t* a, const int8_t* b, int16_t* y, int64_t n) {
  #pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) y[i] = (int16_t)a[i] + (int16_t)b[i];
}
''')

# ---- scalar ------------------------------------------------------------------------------------
CASES["scalar"] = dict(
    task=HDR + '''
    def forward(self, x):
        return x.sum()

def get_inputs():
    return [torch.randn(512, 1024)]

def get_init_inputs():
    return []
''',
    model_new='''
import torch.nn as nn
import cpu_extension

class ModelNew(nn.Module):
    def forward(self, x):
        return cpu_extension.total(x.contiguous())
''',
    binding='''
#include "binding_registry.h"
extern "C" double sum_kernel(const float* x, int64_t n);
at::Tensor sum_forward(const at::Tensor& x) {
  CHECK_CONTIGUOUS(x); CHECK_DTYPE(x, at::kFloat);
  auto y = at::empty({}, x.options());
  y.data_ptr<float>()[0] = (float)sum_kernel(x.data_ptr<float>(), x.numel());
  return y;
}
REGISTER_BINDING(total, sum_forward)
''',
    kernel='''
#include <cstdint>
extern "C" double sum_kernel(const float* x, int64_t n) {
  double s = 0;
  #pragma omp parallel for reduction(+:s)
  for (int64_t i = 0; i < n; ++i) s += x[i];
  return s;
}
''')

if __name__ == "__main__":
    try:
        for arg in sys.argv[1:] or list(CASES):
            case, _, mode = arg.partition(":")  # CASE:verify = measure=False (verification only, no baseline client)
            c = CASES[case]
            ws = workspace(f"h1_{case}", c["model_new"], {"k.cpp": c["kernel"], "k_binding.cpp": c["binding"]},
                           c["task"])
            cfg = config()
            if mode == "verify":
                cfg = cfg.model_copy(update={"measure": False})
            run("h1_honest_battery", arg, ws, cfg, deserved=">=1 (honest, correct)" if mode != "verify" else "correct")
    finally:
        shutdown()
