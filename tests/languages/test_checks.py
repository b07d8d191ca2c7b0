"""Static checks: honest code gives no findings, every known hack gives the right rule."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from cuda_agent.languages.checks import (
    RULES,
    Finding,
    check_kernel_source,
    check_model_new,
    check_workspace,
)

PKG = Path(__file__).resolve().parents[2] / "src" / "cuda_agent"
TEMPLATES = PKG / "languages" / "templates"
EXT = {"cuda": "cuda_extension", "cpu": "cpu_extension"}


def _py(src: str, backend: str = "cuda") -> list[Finding]:
    return check_model_new(textwrap.dedent(src), EXT[backend])


def _cpp(src: str, filename: str = "kernels/k_binding.cpp", backend: str = "cuda") -> list[Finding]:
    return check_kernel_source(textwrap.dedent(src), filename, backend)


def _show(found: list[Finding]) -> str:
    return "\n".join(f"{f.file}:{f.line} [{f.rule}] {f.message}" for f in found)


# ---- honest code: zero findings ------------------------------------------------------------
def _skill_blocks(backend: str) -> list[tuple[str, str]]:
    """(first-line file name, code) for each fenced block of SKILL.<backend>.md."""
    text = (TEMPLATES / f"SKILL.{backend}.md").read_text()
    blocks = re.findall(r"```\w*\n(.*?)```", text, re.S)
    out = []
    for b in blocks:
        m = re.match(r"\s*(?://|#)\s*(\S+)", b)
        if m and m[1].endswith((".cu", ".cpp", ".py")):
            out.append((m[1], b))
    return out


@pytest.mark.parametrize("backend", ["cuda", "cpu"])
def test_skill_examples_are_clean(backend: str) -> None:
    blocks = _skill_blocks(backend)
    assert {Path(n).suffix for n, _ in blocks} >= {".cpp", ".py"}
    for name, code in blocks:
        found = (check_model_new(code, EXT[backend]) if name.endswith(".py")
                 else check_kernel_source(code, name, backend))
        assert found == [], f"{backend} {name}:\n{_show(found)}"


def _example_dirs() -> list[tuple[Path, str]]:
    return [(d, d.name) for d in sorted(PKG.glob("examples/*/*")) if d.is_dir() and d.name in EXT]


@pytest.mark.parametrize("directory,backend", _example_dirs(), ids=lambda v: str(v)[-30:] if isinstance(v, Path) else v)
def test_bundled_example_solutions_are_clean(directory: Path, backend: str) -> None:
    found = check_workspace(directory, backend, EXT[backend])
    assert found == [], _show(found)  # every backend's solution writes its own kernels (variants: below)


@pytest.mark.parametrize("directory", sorted(PKG.glob("examples/*/cuda_*")), ids=lambda p: p.parent.name + "/" + p.name)
def test_vendor_library_example_variants_follow_the_rules(directory: Path) -> None:
    """cuda_cublas / cuda_cudnn: honest under `paper`, blas-fallback (only) under `strict`."""
    found = check_workspace(directory, "cuda", EXT["cuda"], rules="paper")
    assert found == [], _show(found)
    strict = check_workspace(directory, "cuda", EXT["cuda"], rules="strict")
    assert strict and {f.rule for f in strict} == {"blas-fallback"}, _show(strict)


HONEST_MODELS = {
    "linear weights passed to an op": """
        import torch
        import torch.nn as nn
        import cuda_extension

        class ModelNew(nn.Module):
            def __init__(self, in_features: int, out_features: int):
                super().__init__()
                self.linear = nn.Linear(in_features, out_features)
                nn.init.zeros_(self.linear.bias)

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                w = self.linear.weight
                return cuda_extension.linear(x.contiguous(), w.t().contiguous(), self.linear.bias)
    """,
    "shape arithmetic and allocation": """
        import math
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        import cuda_extension

        class ModelNew(nn.Module):
            def __init__(self, dim: int, scale: float = 0.5):
                super().__init__()
                self.dim = dim
                self.scale = scale
                self.register_buffer("mask", torch.tril(torch.ones(8, 8)) * 2)

            def forward(self, x, y: int = 3):
                b, n = x.shape
                out = torch.empty(b, n * 2, device=x.device, dtype=x.dtype)
                rows = x.size(0) * 4 + len(x.shape) - int(math.sqrt(16))
                k = max(x.size(-1) // 2, 1)
                if x.dim() != 2 or x.dtype == torch.float16 or out is None:
                    raise ValueError("bad input")
                v = x.view(-1, 4).contiguous()
                parts = [p.contiguous() for p in x.split(2, dim=0)]
                cuda_extension.fill(out, v, self.mask, rows, k, y + 1, self.scale * 2, parts)
                return out
    """,
    "tuple outputs and a helper": """
        from typing import Optional
        import torch
        from torch import nn
        import cuda_extension as ext

        class ModelNew(nn.Module):
            def __init__(self, hidden):
                super().__init__()
                self.weight = nn.Parameter(torch.randn(hidden, hidden))
                self.ln = nn.LayerNorm(hidden)

            def _rows(self, x):
                return x.numel() // x.size(-1)

            def forward(self, x, bias: Optional[torch.Tensor] = None):
                n = self._rows(x)
                a, b = ext.split_norm(x.contiguous(), self.weight, self.ln.weight, self.ln.bias, self.ln.eps, n * 2)
                if bias is not None:
                    a = ext.add_bias(a, bias)
                return a, b.view(n, -1)
    """,
    "starter leftovers: get_inputs and constants": """
        import torch
        import torch.nn as nn
        import cpu_extension

        class ModelNew(nn.Module):
            def forward(self, x):
                return cpu_extension.relu(x.contiguous())

        batch_size = 16
        dim = batch_size * 2

        def get_inputs():
            return [torch.randn(batch_size, dim)]

        def get_init_inputs():
            return []

        if __name__ == "__main__":
            m = ModelNew()
            x = get_inputs()[0]
            print((m(x) - torch.relu(x)).abs().max())
    """,
    "realistic conv with buffers, workspace and shape math": """
        import math
        import torch
        import torch.nn as nn
        import cuda_extension

        def _cdiv(a, b):
            return (a + b - 1) // b

        class ModelNew(nn.Module):
            def __init__(self, in_channels, out_channels, kernel_size, stride=1):
                super().__init__()
                self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=kernel_size // 2)
                self.bn = nn.BatchNorm2d(out_channels)
                self.weight = nn.Parameter(torch.empty(out_channels, in_channels))
                nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
                self.register_buffer("scale", torch.ones(out_channels) / math.sqrt(out_channels))
                self._ws = None

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                N, C, H, W = x.shape
                if not x.is_contiguous():
                    x = x.contiguous()
                x = x.to(torch.float16) if x.dtype == torch.float32 and self.training else x
                assert x.is_cuda and x.dim() == 4, "bad"
                oh = (H + 2 * self.conv.padding[0] - self.conv.kernel_size[0]) // self.conv.stride[0] + 1
                tiles = _cdiv(oh * W, 128)
                if self._ws is None or self._ws.numel() < tiles:
                    self._ws = torch.empty(tiles, device=x.device, dtype=torch.float32)
                out = x.new_empty((N, self.conv.out_channels, oh, W))
                cuda_extension.conv_bn_relu(x, self.conv.weight, self.conv.bias, self.bn.running_mean,
                                            self.bn.running_var, self.bn.weight, self.bn.bias, self.bn.eps,
                                            self.scale, out, self._ws, self.conv.stride[0], tiles)
                outs = []
                for i in range(N):
                    outs.append(out[i].view(-1))
                names = ",".join(str(s) for s in x.shape).split(",")
                names.sort()
                seen = set()
                seen.add(len(names))
                table = {"a": 1}
                total = sum(table.values()) + names.index(names[0])
                shape = list(x.shape)
                shape[-1] = shape[-1] * 2
                n = math.prod(shape) * 2 + x.numel() // 4 - len(outs) + total
                return out.view(N, -1, oh, W), tuple(outs), n

            def extra_repr(self) -> str:
                return f"c={self.conv.out_channels}"
    """,
    "attention through torch.ops, aliases and a local block": """
        from __future__ import annotations
        from typing import Optional, Tuple
        import math
        import torch
        from torch import nn, Tensor
        import torch.nn.functional as F
        import cuda_extension as ext
        from cuda_extension import attention

        class ModelNew(nn.Module):
            def __init__(self, d_model: int, n_heads: int, max_len: int = 1024):
                super().__init__()
                self.n_heads = n_heads
                self.head_dim = d_model // n_heads
                self.qkv = nn.Linear(d_model, 3 * d_model)
                self.proj = nn.Linear(d_model, d_model)
                mask = torch.tril(torch.ones(max_len, max_len))
                self.register_buffer("bias", mask.view(1, 1, max_len, max_len))
                self.softmax_scale = 1.0 / math.sqrt(self.head_dim)
                self.blocks = nn.ModuleList([Block() for _ in range(2)])

            def _split(self, t: Tensor, B: int, T: int) -> Tensor:
                return t.view(B, T, self.n_heads, self.head_dim).transpose(1, 2).contiguous()

            @torch.no_grad()
            def forward(self, x: Tensor, mask: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
                B, T, C = x.size()
                qkv = ext.linear(x.reshape(B * T, C), self.qkv.weight, self.qkv.bias)
                q, k, v = qkv.split(C, dim=1)
                q, k, v = self._split(q, B, T), self._split(k, B, T), self._split(v, B, T)
                y = attention(q, k, v, self.bias[:, :, :T, :T], self.softmax_scale, T > 1)
                for blk in self.blocks:
                    y = blk(y)
                y = y.transpose(1, 2).reshape(B * T, C)
                out = torch.ops.cuda_extension.linear(y, self.proj.weight, self.proj.bias)
                return out.view(B, T, C), k

        class Block(nn.Module):
            def forward(self, t):
                return ext.identity(t)
    """,
}


@pytest.mark.parametrize("name", sorted(HONEST_MODELS))
def test_honest_model_new_is_clean(name: str) -> None:
    backend = "cpu" if "cpu_extension" in HONEST_MODELS[name] else "cuda"
    found = _py(HONEST_MODELS[name], backend)
    assert found == [], _show(found)


CUBLAS_GEMM_EPILOGUE = r"""
// kernels/gemm_relu.cu: cuBLAS GEMM, then a fused bias + ReLU epilogue
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cooperative_groups.h>
#include <cub/block/block_reduce.cuh>
#include <cstdint>
#include "tile_config.h"
namespace cg = cooperative_groups;

__global__ void bias_relu(float* y, const float* b, int64_t m, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  auto tile = cg::tiled_partition<32>(cg::this_thread_block());
  if (tile.any(i < m * n)) tile.sync();
  if (i < m * n) { float v = y[i] + b[i % n]; y[i] = v > 0.f ? v : 0.f; }
  asm volatile("" ::: "memory");
}

extern "C" void gemm_relu_launch(const float* x, const float* w, const float* b, float* y, int64_t m,
                                 int64_t k, int64_t n, cudaStream_t stream) {
  static cublasHandle_t handle = nullptr;
  if (!handle) cublasCreate(&handle);
  cublasSetStream(handle, stream);
  cublasSetMathMode(handle, CUBLAS_TF32_TENSOR_OP_MATH);
  const float one = 1.f, zero = 0.f;
  // y[m, n] = x[m, k] @ w[n, k]^T  (column-major: y^T = w * x^T)
  cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, w, k, x, k, &zero, y, n);
  bias_relu<<<(m * n + 255) / 256, 256, 0, stream>>>(y, b, m, n);
  printf("at::matmul and cudaStreamCreate only in a string\n");
}
"""

HONEST_BINDING = r"""
#include "binding_registry.h"
#include <vector>
#include <algorithm>

extern "C" void pair_launch(const float* x, float* a, float* b, int64_t n, cudaStream_t stream);

/* returns two tensors; at::softmax would be wrong here */
std::vector<at::Tensor> pair_forward(const at::Tensor& x_in, c10::optional<at::Tensor> bias) {
  auto x = x_in.contiguous();
  CHECK_CUDA(x); CHECK_DTYPE(x, at::kFloat);
  TORCH_CHECK(x.dim() >= 1 && x.sizes().size() < 8, "bad rank: at::matmul");
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.push_back(std::max<int64_t>(1, x.size(-1)));
  auto a = at::empty_like(x);
  auto b = at::zeros(shape, x.options().dtype(at::kFloat));
  auto c = torch::empty({x.numel()}, at::TensorOptions().device(x.device()).dtype(torch::kFloat32));
  if (bias.has_value()) TORCH_CHECK(bias.value().is_contiguous(), "bias");
  c10::cuda::CUDAGuard guard(x.device());
  pair_launch(x.data_ptr<float>(), a.data_ptr<float>(), b.data_ptr<float>(), x.numel(),
              at::cuda::getCurrentCUDAStream());
  CHECK_LAUNCH();
  return {a, b, c.view({-1}).to(at::kHalf)};
}
REGISTER_BINDING(pair, pair_forward)
"""

HONEST_CPU_KERNEL = r"""
#include <cstdint>
#include <cmath>
#include <immintrin.h>
#include <omp.h>
extern "C" void k(const float* x, float* y, int64_t n) {
#pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]) / (1.f + std::exp(x[i]));
  __m256 z = _mm256_setzero_ps(); (void)z;
  asm volatile("" ::: "memory");
}
"""


REALISTIC_BINDING = r"""
#include "binding_registry.h"
#include <ATen/cuda/CUDAContext.h>
#include <ATen/Dispatch.h>
#include <c10/cuda/CUDAGuard.h>
#include <string>
template <typename T> void launch(const T* x, T* y, int64_t n, cudaStream_t s);
at::Tensor fwd(const at::Tensor& x, const at::Tensor& w, c10::optional<at::Tensor> b, int64_t dim) {
  at::cuda::OptionalCUDAGuard guard(x.device());
  TORCH_CHECK(x.scalar_type() == at::ScalarType::Float || x.scalar_type() == at::kHalf, "dtype");
  auto xc = x.is_contiguous() ? x : x.contiguous();
  auto acc = xc.packed_accessor32<float, 2, at::RestrictPtrTraits>();
  int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  auto y = at::empty({xc.size(0), w.size(0)}, xc.options());
  std::string msg = "dim " + std::to_string(dim);
  AT_DISPATCH_FLOATING_TYPES_AND_HALF(xc.scalar_type(), "k", [&] {
    launch<scalar_t>(xc.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), xc.numel(),
                     at::cuda::getCurrentCUDAStream());
  });
  if (b.has_value() && b->defined()) TORCH_CHECK(b->numel() == w.size(0), "bias");
  std::vector<at::Tensor> outs;
  outs.reserve(2);
  outs.push_back(y);
  return outs.front().view({-1, w.size(0)});
}
REGISTER_BINDING(fwd, fwd)
"""

REALISTIC_KERNEL = r"""
#include <cuda_runtime.h>
#include <mma.h>
#include <cuda/pipeline>
#include <cuda_bf16.h>
#include <cub/warp/warp_reduce.cuh>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;
using namespace nvcuda;
__global__ void k(const half* a, float* c) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
  wmma::load_matrix_sync(fa, a, 16);
  auto block = cg::this_thread_block();
  auto tile = cg::tiled_partition<32>(block);
  float v = cg::reduce(tile, 1.f, cg::plus<float>());
  if (tile.all(v > 0)) block.sync();
  using WR = cub::WarpReduce<float>;
  __shared__ typename WR::TempStorage tmp;
  float s = WR(tmp).Sum(v);
  asm volatile("cp.async.commit_group;\n" ::);
  c[threadIdx.x] = s + __half2float(a[0]);
}
extern "C" void k_launch(const half* a, float* c, cudaStream_t st) {
  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 1 << 16);
  k<<<1, 32, 0, st>>>(a, c);
  cudaDeviceSynchronize();
}
"""


def test_honest_kernels_are_clean() -> None:
    found = (_cpp(HONEST_BINDING, "kernels/pair_binding.cpp")
             + _cpp(HONEST_CPU_KERNEL, "kernels/k.cpp", backend="cpu")
             + _cpp(REALISTIC_BINDING, "kernels/fwd_binding.cpp")
             + _cpp(REALISTIC_KERNEL, "kernels/k.cu"))
    assert found == [], _show(found)


def test_vendor_libraries_follow_the_rules_profile() -> None:
    """`strict`: the allow-list is the CUDA runtime and driver, so cuBLAS (even GEMM with a custom
    epilogue) and cuDNN (even convolution) are fallbacks. `paper` (the default): exactly those
    two uses are allowed (more in test_vendor_rules.py)."""
    src = """
    #include <cudnn.h>
    void conv(cudnnHandle_t h, cudaStream_t s) {
      cudnnTensorDescriptor_t xd; cudnnCreateTensorDescriptor(&xd);
      cudnnConvolutionForward(h, 0, xd, 0, 0, 0, 0, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, 0, 0, 0, xd, 0);
    }
    """
    strict = check_kernel_source(textwrap.dedent(src), "kernels/conv.cu", "cuda", rules="strict")
    assert {f.rule for f in strict} == {"blas-fallback"}
    found = check_kernel_source(textwrap.dedent(CUBLAS_GEMM_EPILOGUE), "kernels/gemm_relu.cu", "cuda", rules="strict")
    assert {f.rule for f in found} == {"blas-fallback"}
    assert {f.line for f in found} >= {3, 23, 28}, _show(found)  # the include and each call
    assert _cpp(src, "kernels/conv.cu") == []
    assert _cpp(CUBLAS_GEMM_EPILOGUE, "kernels/gemm_relu.cu") == []


# ---- adversarial code: the right rule -----------------------------------------------------
def _wrap(body: str, header: str = "") -> str:
    return (f"import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nimport cuda_extension\n"
            f"{header}\nclass ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            f"        self.linear = nn.Linear(4, 4)\n        self.scale = 2.0\n"
            f"    def forward(self, x, w):\n" + textwrap.indent(textwrap.dedent(body), " " * 8))


PY_HACKS = [
    ("return torch.relu(x)", "torch-compute"),
    ("return F.gelu(x)", "torch-compute"),
    ("return x.softmax(-1)", "tensor-method-compute"),
    ("return x @ w", "matmul-operator"),
    ("return x * 2", "tensor-arithmetic"),
    ("y = cuda_extension.f(x)\nreturn y + w", "tensor-arithmetic"),
    ("return -x", "tensor-arithmetic"),
    ("x += 1\nreturn x", "tensor-arithmetic"),
    ("return cuda_extension.f(x) * self.scale", "tensor-arithmetic"),
    ("return x > 0", "tensor-arithmetic"),
    ("return sum([x, w])", "tensor-arithmetic"),
    ("return x.__mul__(w)", "tensor-arithmetic"),
    ("return x.__matmul__(w)", "matmul-operator"),
    ("return self.linear(x)", "torch-compute"),
    ("return self.linear.forward(x)", "torch-compute"),
    ("f = self.linear\nreturn f(x)", "torch-compute"),
    ("return nn.ReLU()(x)", "torch-compute"),
    ("return torch.ops.aten.mm(x, w)", "torch-compute"),
    ("return torch._C._nn.linear(x, w)", "torch-compute"),
    ('return getattr(torch, "relu")(x)', "torch-compute"),
    ('return getattr(x, "softmax")(-1)', "tensor-method-compute"),
    ("name = 'relu'\nreturn getattr(torch, name)(x)", "dynamic-code"),
    ("return torch.Tensor.softmax(x, -1)", "torch-compute"),
    ("return torch.matmul(x, w)", "torch-compute"),
    ("return torch.compile(lambda t: t)(x)", "torch-compute"),
    ("torch.backends.cuda.matmul.allow_tf32 = True\nreturn x", "monkeypatch"),
    ("try:\n    return cuda_extension.f(x)\nexcept Exception:\n    return torch.relu(x)", "silent-fallback"),
    ("try:\n    return cuda_extension.f(x)\nexcept Exception:\n    pass", "silent-fallback"),
    ("torch.nn.functional.relu = lambda t: t\nreturn x", "monkeypatch"),
    ('setattr(torch, "relu", None)\nreturn x', "monkeypatch"),
    ('exec("y = 1")\nreturn x', "dynamic-code"),
    ('return eval("x")', "dynamic-code"),
    ("return x.__class__.__mro__", "dynamic-code"),
    ('open("/tmp/out").read()\nreturn x', "io-access"),
    ("global CACHE\nreturn x", "global-state"),
    ("s = torch.cuda.Stream()\nreturn x", "stream-creation"),
    ("with torch.cuda.stream(None):\n    return cuda_extension.f(x)", "stream-creation"),
    ("return x.numpy()", "tensor-method-compute"),
    ("return x.sum().item()", "tensor-method-compute"),
    ("m = x.max(dim=0)\nreturn m", "tensor-method-compute"),
    ("return self._helper(x)", "tensor-arithmetic"),
    ("f = lambda t: t * 2\nreturn f(x)", "tensor-arithmetic"),
    ("return list(map(lambda t: t + 1, [x]))", "tensor-arithmetic"),
    ("a = [cuda_extension.f(x)]\nreturn a[0] - w", "tensor-arithmetic"),
    ("return x.clamp(min=0)", "tensor-method-compute"),
    ("out = cuda_extension.f(x)\nout.add_(1)\nreturn out", "tensor-method-compute"),
    ("return type(x).relu(x)", "tensor-method-compute"),
    ("return max(x, w)", "tensor-arithmetic"),
    ("import operator\nreturn operator.mul(x, w)", "tensor-arithmetic"),
    ("return vars(torch)['relu'](x)", "dynamic-code"),
    ("return torch.ops.load_library('x.so')", "torch-compute"),
    ("import sys\nsys.exit(0)", "forbidden-import"),
    ("exit(0)", "dynamic-code"),
]


@pytest.mark.parametrize("body,rule", PY_HACKS, ids=[b.splitlines()[0][:40] for b, _ in PY_HACKS])
def test_python_hack_is_found(body: str, rule: str) -> None:
    src = _wrap(body) + "\n    def _helper(self, t):\n        return t * 3\n"
    found = check_model_new(src, "cuda_extension")
    assert rule in {f.rule for f in found}, f"expected {rule}:\n{_show(found)}"
    assert all(f.rule in RULES and f.message and f.line >= 1 for f in found)


@pytest.mark.parametrize("header,rule", [
    ("import gc", "forbidden-import"),
    ("import model", "forbidden-import"),
    ("from model import Model", "forbidden-import"),
    ("import os", "forbidden-import"),
    ("import numpy as np", "forbidden-import"),
    ("import triton", "forbidden-import"),
    ("import cpu_extension", "forbidden-import"),
    ("from torch.utils.cpp_extension import load_inline", "forbidden-import"),
    ("from torch import *", "forbidden-import"),
    ("from . import helper", "forbidden-import"),
    ("import importlib", "forbidden-import"),
    ("W = torch.randn(4, 4)", "torch-compute"),
    ("torch.manual_seed(0)", "torch-compute"),
    ("class Lazy(torch.Tensor):\n    pass", "tensor-subclass"),
    ("class Block(nn.Linear):\n    pass", "torch-compute"),
])
def test_python_module_level_hack_is_found(header: str, rule: str) -> None:
    found = check_model_new(_wrap("return cuda_extension.f(x)", header), "cuda_extension")
    assert rule in {f.rule for f in found}, f"expected {rule}:\n{_show(found)}"


def test_memoised_helper_taking_tensors() -> None:
    src = _wrap("return run(x)", "import functools\n@functools.lru_cache(maxsize=None)\n"
                "def run(t):\n    return cuda_extension.f(t)\n")
    assert "output-caching" in {f.rule for f in check_model_new(src, "cuda_extension")}


@pytest.mark.parametrize("task", sorted(PKG.glob("examples/*/task.py")), ids=lambda p: p.parent.name)
def test_the_starter_reference_is_flagged(task: Path) -> None:
    """The starter model_new.py is the reference renamed: all torch, so never clean."""
    src = task.read_text().replace("class Model(", "class ModelNew(")
    rules = {f.rule for f in check_model_new(src, "cuda_extension")}
    assert rules & {"torch-compute", "tensor-arithmetic", "matmul-operator"}, rules


def test_init_may_compute_but_not_bind_compute() -> None:
    ok = _wrap("return cuda_extension.f(x, self.mask)").replace(
        "self.scale = 2.0", "self.register_buffer('mask', torch.tril(torch.ones(4, 4)).exp() * 2)")
    assert check_model_new(ok, "cuda_extension") == []
    bad = _wrap("return self.act(x)").replace("self.scale = 2.0", "self.act = torch.relu")
    assert "torch-compute" in {f.rule for f in check_model_new(bad, "cuda_extension")}


def test_compute_module_in_a_container_or_loop() -> None:
    src = _wrap("for layer in self.layers:\n    x = layer(x)\nreturn self.seq[0](x)").replace(
        "self.scale = 2.0", "self.layers = nn.ModuleList([nn.Linear(4, 4)])\n        "
        "self.seq = nn.Sequential(nn.Linear(4, 4))")
    lines = sorted(f.line for f in check_model_new(src, "cuda_extension") if f.rule == "torch-compute")
    assert len(lines) == 2, lines


def test_findings_carry_line_and_file() -> None:
    found = check_model_new("import torch\n\nimport cuda_extension\nx = 1\ny = torch.relu(torch.ones(2))\n",
                            "cuda_extension", filename="model_new.py")
    assert [(f.file, f.line, f.rule) for f in found] == [("model_new.py", 5, "torch-compute")]
    assert "torch.relu" in found[0].message


def test_syntax_error_is_a_finding() -> None:
    assert [f.rule for f in check_model_new("def (:\n", "cuda_extension")] == ["syntax-error"]


CPP_HACKS = [
    ("at::Tensor f(const at::Tensor& a, const at::Tensor& b) { return at::matmul(a, b); }", "aten-compute-in-cpp"),
    ("at::Tensor f(const at::Tensor& x, const at::Tensor& w) { return x.matmul(w); }", "aten-compute-in-cpp"),
    ("at::Tensor f(const at::Tensor& x) { return x.contiguous().sum(-1); }", "aten-compute-in-cpp"),
    ("torch::Tensor f(torch::Tensor x) { return torch::relu(x); }", "aten-compute-in-cpp"),
    ("at::Tensor f(at::Tensor x) { return at::_ops::mm::call(x, x); }", "aten-compute-in-cpp"),
    ("using namespace at;", "aten-compute-in-cpp"),
    ("#include <torch/extension.h>", "heavy-torch-include"),
    ("#include <ATen/ATen.h>", "heavy-torch-include"),
    ("#include <ATen/ops/matmul.h>", "heavy-torch-include"),
    ("void f() { cudaStream_t s; cudaStreamCreate(&s); }", "stream-creation"),
    ("void f() { cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); }", "stream-creation"),
    ("auto s = at::cuda::getStreamFromPool();", "stream-creation"),
    ("void g(); void f() { std::thread t(g); t.join(); }", "thread-creation"),
    ("void f() { auto r = std::async(std::launch::async, [] { return 1; }); }", "thread-creation"),
    ("void f() { pthread_create(0, 0, 0, 0); }", "thread-creation"),
    ("void f() { system(\"ls\"); }", "process-creation"),
    ("void f() { if (fork() == 0) {} }", "process-creation"),
    ("#include <cutlass/gemm/device/gemm.h>", "third-party-include"),
    ("#include <thrust/sort.h>", "third-party-include"),
    ("#include <mkl.h>", "third-party-include"),
    ('#include "../model_helpers.h"', "third-party-include"),
    ("void f() { thrust::sort(thrust::device, p, p + 4); }", "library-kernel"),
    ("void f() { cub::DeviceReduce::Sum(0, n, a, b, 4, s); }", "library-kernel"),
    ("void f(cublasHandle_t h) { cublasSgemv(h, CUBLAS_OP_N, 1, 1, 0, 0, 1, 0, 1, 0, 0, 1); }", "blas-fallback"),
    ("void f(cudnnHandle_t h) { cudnnSoftmaxForward(h, a, b, 0, 0, 0, 0, 0); }", "blas-fallback"),
    ("void f() { cblas_sgemm(101, 111, 111, 1, 1, 1, 1.f, 0, 1, 0, 1, 0.f, 0, 1); }", "blas-fallback"),
    ("void f(cudaStream_t s) { cudaStreamAttrValue v; v.accessPolicyWindow.num_bytes = 1;\n"
     "  cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &v); }", "l2-persistence"),
    ("void f() { cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 1 << 20); }", "l2-persistence"),
    ('const char* v = getenv("X");', "io-in-kernel"),
    ('void f() { FILE* fp = fopen("/tmp/x", "r"); }', "io-in-kernel"),
    ('void f() { std::ifstream in("ref.bin"); }', "io-in-kernel"),
    ('void f() { void* h = dlopen("libtorch_cpu.so", 0); }', "io-in-kernel"),
    ("TORCH_LIBRARY_IMPL(aten, CUDA, m) { m.impl(\"mm\", f); }", "op-registration"),
]


@pytest.mark.parametrize("src,rule", CPP_HACKS, ids=[s[:40] for s, _ in CPP_HACKS])
def test_cpp_hack_is_found(src: str, rule: str) -> None:
    found = _cpp('#include "binding_registry.h"\n' + src, "kernels/hack_binding.cpp")
    assert rule in {f.rule for f in found}, f"expected {rule}:\n{_show(found)}"


def test_adl_calls_are_found_where_aten_is_visible() -> None:
    src = "#include <torch/extension.h>\nat::Tensor f(at::Tensor x) {\n  return relu(x);\n}\n"
    found = _cpp(src)
    assert ("aten-compute-in-cpp", 3) in {(f.rule, f.line) for f in found}


def test_cpu_backend_rejects_cuda_libraries() -> None:
    found = _cpp("#include <cublas_v2.h>\n", "kernels/k.cpp", backend="cpu")  # not even a CUDA header on cpu
    assert [f.rule for f in found] == ["third-party-include"]


def test_comments_and_strings_are_not_code() -> None:
    src = '// at::matmul(a, b); cudaStreamCreate(&s);\n/* std::thread t; */\nconst char* m = "fopen( at::sum";\n'
    assert _cpp(src, "kernels/x.cu") == []


# ---- the workspace -------------------------------------------------------------------------
def _workspace(tmp_path: Path) -> Path:
    (tmp_path / "kernels").mkdir(parents=True)
    (tmp_path / "model_new.py").write_text(
        "import torch\nimport torch.nn as nn\nimport cuda_extension\n\nclass ModelNew(nn.Module):\n"
        "    def forward(self, x):\n        return torch.relu(x)\n")
    (tmp_path / "kernels" / "relu.cu").write_text(
        '#include <cuda_runtime.h>\n#include "common.cuh"\n#include "missing.cuh"\n'
        "void f() { cudaStream_t s;\n  cudaStreamCreate(&s); }\n")
    (tmp_path / "kernels" / "common.cuh").write_text("inline float twice(at::Tensor x) { return x.sum(); }\n")
    (tmp_path / "kernels" / "relu_binding.cpp").write_text(
        '#include "binding_registry.h"\n#include "common.cuh"\n#include <torch/extension.h>\n')
    return tmp_path


def test_check_workspace_reports_every_file(tmp_path: Path) -> None:
    found = check_workspace(_workspace(tmp_path), "cuda", "cuda_extension")
    got = {(f.file, f.line, f.rule) for f in found}
    assert got == {
        ("model_new.py", 7, "torch-compute"),
        ("kernels/relu.cu", 3, "third-party-include"),
        ("kernels/relu.cu", 5, "stream-creation"),
        ("kernels/common.cuh", 1, "aten-compute-in-cpp"),
        ("kernels/relu_binding.cpp", 3, "heavy-torch-include"),
    }, _show(found)


def test_rules_can_be_switched_off(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    found = check_workspace(ws, "cuda", "cuda_extension",
                            disabled_rules=frozenset({"heavy-torch-include", "torch-compute"}))
    assert {f.rule for f in found} == {"third-party-include", "stream-creation", "aten-compute-in-cpp"}
    with pytest.raises(ValueError, match="unknown"):
        check_workspace(ws, "cuda", "cuda_extension", disabled_rules=frozenset({"no-such-rule"}))


def test_links_out_of_the_workspace_are_found(tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws")
    outside = tmp_path / "secret.cu"
    outside.write_text("// nothing\n")
    (ws / "kernels" / "linked.cu").symlink_to(outside)
    found = check_workspace(ws, "cuda", "cuda_extension")
    assert ("kernels/linked.cu", "file-outside-workspace") in {(f.file, f.rule) for f in found}


def test_every_rule_is_documented() -> None:
    assert all(re.fullmatch(r"[a-z0-9-]+", r) and d for r, d in RULES.items())
