# A KernelBench-style single-file solution for the bundled `swish` example: ModelNew builds
# its CUDA kernel itself with torch's load_inline. `cuda-agent bench run examples --only swish
# --solutions bench/benchmark_solutions` feeds it through the isolated evaluation (see
# docs/benchmark.md, "single-file solutions").
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void swish_kernel(const float4* __restrict__ x, float4* __restrict__ y, long n4) {
  long stride = (long)gridDim.x * blockDim.x;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n4; i += stride) {
    float4 v = x[i];
    v.x = v.x / (1.f + __expf(-v.x));
    v.y = v.y / (1.f + __expf(-v.y));
    v.z = v.z / (1.f + __expf(-v.z));
    v.w = v.w / (1.f + __expf(-v.w));
    y[i] = v;
  }
}

torch::Tensor swish_forward(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat, "float CUDA contiguous");
  TORCH_CHECK(x.numel() % 4 == 0, "numel must be a multiple of 4");
  auto y = torch::empty_like(x);
  long n4 = x.numel() / 4;
  int threads = 256;
  int blocks = (int)std::min<long>((n4 + threads - 1) / threads, 132L * 16);
  swish_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
      reinterpret_cast<const float4*>(x.data_ptr<float>()), reinterpret_cast<float4*>(y.data_ptr<float>()), n4);
  return y;
}
"""

swish_ext = load_inline(name="bench_swish_inline", cpp_sources="torch::Tensor swish_forward(torch::Tensor x);",
                        cuda_sources=cuda_source, functions=["swish_forward"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return swish_ext.swish_forward(x.contiguous())
