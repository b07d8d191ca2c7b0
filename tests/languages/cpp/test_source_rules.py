"""The C++ rules: honest kernels, bindings and workspaces give no findings, every known hack gives the
right rule."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from cuda_agent.languages.cpp import TEMPLATES_DIR as TEMPLATES
from cuda_agent.languages.cpp.source_rules import check_kernel_source, check_workspace
from cuda_agent.languages.model_new_rules import check_model_new
from cuda_agent.languages.records import Finding

PKG = Path(__file__).resolve().parents[3] / "src" / "cuda_agent"
EXT = {"cuda": "cuda_extension", "cpu": "cpu_extension"}


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
    two uses are allowed (more in test_vendor.py)."""
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
