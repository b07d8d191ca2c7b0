"""h1 (round 15): honest kernels with unusual but legitimate properties; each should keep reward >= 1.
Cases:
  mixed_empty  forward(a, b, c) -> (relu(a), relu(b), relu(c)) with b of shape (64, 0): a tuple mixing empty and
               non-empty outputs (round 14's mend reads 0-byte outputs as empty, `materialise`, judge.py:1858)
  padded_view  relu into a buffer with 16 floats of padding per row, returned as the [:, :C] view (extent < 2x)
  causal_mask  forward(x, mask) -> x.masked_fill(~mask, 0), mask = torch.tril(ones).bool(): an integer/bool input
               constant by design (`Judge._check_inputs_move`, judge.py:494)
  complex      forward(z, x) -> (z * 2, relu(x)), z complex64: a non-floating input that is not an integer
  complex_in   forward(z) -> view_as_real(z).sum(-1): complex input, real output
  scalar_moves forward(x, k) -> x * k, k a Python int drawn per seed (torch.randint(...).item())
  ints_move    forward(x, idx) -> x[idx] (index_select rows), idx from torch.randint: integer inputs that move
Usage: h1_honest_battery.py CASE[,CASE...]
"""
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import config, run, shutdown, workspace  # noqa: E402

CASES = {}
CASES["mixed_empty"] = ('''
import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, a, b, c):
        return torch.relu(a), torch.relu(b), torch.relu(c)
def get_inputs():
    return [torch.randn(256, 1024), torch.randn(64, 0), torch.randn(128, 512)]
def get_init_inputs():
    return []
''', '''
import torch.nn as nn
import cpu_extension
class ModelNew(nn.Module):
    def forward(self, a, b, c):
        return cpu_extension.relu(a.contiguous()), cpu_extension.relu(b.contiguous()), cpu_extension.relu(c.contiguous())
''', '''
#include "binding_registry.h"
at::Tensor relu(const at::Tensor& x) {
  CHECK_CONTIGUOUS(x); CHECK_DTYPE(x, at::kFloat);
  auto y = at::empty_like(x);
  const float* s = x.data_ptr<float>(); float* d = y.data_ptr<float>(); int64_t n = x.numel();
  #pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) d[i] = s[i] > 0.f ? s[i] : 0.f;
  return y;
}
REGISTER_BINDING(relu, relu)
''')
CASES["padded_view"] = ('''
import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        return torch.relu(x)
def get_inputs():
    return [torch.randn(512, 1000)]
def get_init_inputs():
    return []
''', '''
import torch.nn as nn
import cpu_extension
class ModelNew(nn.Module):
    def forward(self, x):
        return cpu_extension.relu_padded(x.contiguous())
''', '''
#include "binding_registry.h"
at::Tensor relu_padded(const at::Tensor& x) {
  CHECK_CONTIGUOUS(x); CHECK_DTYPE(x, at::kFloat);
  int64_t r = x.size(0), c = x.size(1), ld = c + 16;
  auto buf = at::empty({r, ld}, x.options());
  const float* s = x.data_ptr<float>(); float* d = buf.data_ptr<float>();
  #pragma omp parallel for
  for (int64_t i = 0; i < r; ++i) for (int64_t j = 0; j < c; ++j) d[i * ld + j] = s[i * c + j] > 0.f ? s[i * c + j] : 0.f;
  return buf.narrow(1, 0, c);
}
REGISTER_BINDING(relu_padded, relu_padded)
''')
CASES["causal_mask"] = ('''
import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x, mask):
        return x.masked_fill(~mask, 0.0)
def get_inputs():
    return [torch.randn(8, 512, 512), torch.tril(torch.ones(512, 512)).bool()]
def get_init_inputs():
    return []
''', '''
import torch.nn as nn
import cpu_extension
class ModelNew(nn.Module):
    def forward(self, x, mask):
        return cpu_extension.masked(x.contiguous(), mask.contiguous())
''', '''
#include "binding_registry.h"
at::Tensor masked(const at::Tensor& x, const at::Tensor& m) {
  CHECK_CONTIGUOUS(x); CHECK_DTYPE(x, at::kFloat);
  auto y = at::empty_like(x);
  const float* s = x.data_ptr<float>(); const bool* k = m.data_ptr<bool>(); float* d = y.data_ptr<float>();
  int64_t b = x.size(0), n = m.numel();
  #pragma omp parallel for
  for (int64_t i = 0; i < b; ++i) for (int64_t j = 0; j < n; ++j) d[i * n + j] = k[j] ? s[i * n + j] : 0.f;
  return y;
}
REGISTER_BINDING(masked, masked)
''')
CASES["ints_move"] = ('''
import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x, idx):
        return x[idx]
def get_inputs():
    return [torch.randn(4096, 256), torch.randint(0, 4096, (2048,))]
def get_init_inputs():
    return []
''', '''
import torch.nn as nn
import cpu_extension
class ModelNew(nn.Module):
    def forward(self, x, idx):
        return cpu_extension.rows(x.contiguous(), idx.contiguous())
''', '''
#include "binding_registry.h"
#include <cstring>
at::Tensor rows(const at::Tensor& x, const at::Tensor& idx) {
  CHECK_CONTIGUOUS(x); CHECK_DTYPE(x, at::kFloat); CHECK_DTYPE(idx, at::kLong);
  int64_t n = idx.size(0), c = x.size(1);
  auto y = at::empty({n, c}, x.options());
  const float* s = x.data_ptr<float>(); const int64_t* k = idx.data_ptr<int64_t>(); float* d = y.data_ptr<float>();
  #pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) memcpy(d + i * c, s + k[i] * c, c * sizeof(float));
  return y;
}
REGISTER_BINDING(rows, rows)
''')

CASES["complex"] = ('''
import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, z, x):
        return z * 2, torch.relu(x)
def get_inputs():
    return [torch.randn(256, 1024, dtype=torch.complex64), torch.randn(256, 1024)]
def get_init_inputs():
    return []
''', '''
import torch.nn as nn
import cpu_extension
class ModelNew(nn.Module):
    def forward(self, z, x):
        return cpu_extension.twice(z.contiguous()), cpu_extension.relu(x.contiguous())
''', '''
#include "binding_registry.h"
at::Tensor twice(const at::Tensor& z) {
  CHECK_CONTIGUOUS(z);
  auto y = at::empty_like(z);
  const float* s = static_cast<const float*>(z.data_ptr()); float* d = static_cast<float*>(y.data_ptr());
  int64_t n = z.numel() * 2;
  #pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) d[i] = 2.f * s[i];
  return y;
}
at::Tensor relu(const at::Tensor& x) {
  CHECK_CONTIGUOUS(x); CHECK_DTYPE(x, at::kFloat);
  auto y = at::empty_like(x);
  const float* s = x.data_ptr<float>(); float* d = y.data_ptr<float>(); int64_t n = x.numel();
  #pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) d[i] = s[i] > 0.f ? s[i] : 0.f;
  return y;
}
REGISTER_BINDING(twice, twice)
REGISTER_BINDING(relu, relu)
''')

CASES["complex_in"] = ('''
import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, z):
        return torch.view_as_real(z).sum(dim=-1)
def get_inputs():
    return [torch.randn(256, 1024, dtype=torch.complex64)]
def get_init_inputs():
    return []
''', '''
import torch.nn as nn
import cpu_extension
class ModelNew(nn.Module):
    def forward(self, z):
        return cpu_extension.resum(z.contiguous())
''', '''
#include "binding_registry.h"
at::Tensor resum(const at::Tensor& z) {
  CHECK_CONTIGUOUS(z);
  auto y = at::empty(z.sizes(), z.options().dtype(at::kFloat));
  const float* s = static_cast<const float*>(z.data_ptr()); float* d = y.data_ptr<float>();
  int64_t n = z.numel();
  #pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) d[i] = s[2 * i] + s[2 * i + 1];
  return y;
}
REGISTER_BINDING(resum, resum)
''')

CASES["scalar_moves"] = ('''
import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x, k):
        return x * k
def get_inputs():
    return [torch.randn(256, 1024), int(torch.randint(1, 5, ()).item())]
def get_init_inputs():
    return []
''', '''
import torch.nn as nn
import cpu_extension
class ModelNew(nn.Module):
    def forward(self, x, k):
        return cpu_extension.scale(x.contiguous(), float(k))
''', '''
#include "binding_registry.h"
at::Tensor scale(const at::Tensor& x, double k) {
  CHECK_CONTIGUOUS(x); CHECK_DTYPE(x, at::kFloat);
  auto y = at::empty_like(x);
  const float* s = x.data_ptr<float>(); float* d = y.data_ptr<float>(); int64_t n = x.numel(); float f = (float)k;
  #pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) d[i] = s[i] * f;
  return y;
}
REGISTER_BINDING(scale, scale)
''')

if __name__ == "__main__":
    try:
        for case in (sys.argv[1] if len(sys.argv) > 1 else ",".join(CASES)).split(","):
            task, model_new, binding = CASES[case]
            run("h1_honest_battery", case, workspace(f"h1_{case}", model_new, {"k_binding.cpp": binding}, task),
                config(fast=False), deserved=">=1 (honest, correct)")
    finally:
        shutdown()
