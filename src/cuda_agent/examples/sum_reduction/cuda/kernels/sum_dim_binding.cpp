#include "binding_registry.h"

extern "C" void sum_dim_launch(const float* x, float* y, int64_t outer, int64_t R, int64_t inner,
                               cudaStream_t stream);

// torch.sum(x, dim, keepdim=True) for a contiguous fp32 tensor
at::Tensor sum_dim_forward(const at::Tensor& x, int64_t dim) {
  CHECK_CUDA(x);
  CHECK_CONTIGUOUS(x);
  CHECK_DTYPE(x, at::kFloat);
  const int64_t nd = x.dim();
  TORCH_CHECK(nd >= 1, "x must have at least one dimension");
  if (dim < 0) dim += nd;
  TORCH_CHECK(dim >= 0 && dim < nd, "dim out of range");
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < dim; ++i) outer *= x.size(i);
  for (int64_t i = dim + 1; i < nd; ++i) inner *= x.size(i);
  const int64_t R = x.size(dim);
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape[dim] = 1;
  if (R == 0) return at::zeros(shape, x.options());
  auto y = at::empty(shape, x.options());
  if (y.numel() == 0) return y;
  // grids are 1-D over blockIdx.x (limit 2^31 - 1)
  TORCH_CHECK(outer * ((inner + 31) / 32) < (1LL << 31) && outer / 8 < (1LL << 31), "tensor too large");
  c10::cuda::CUDAGuard guard(x.device());
  sum_dim_launch(x.data_ptr<float>(), y.data_ptr<float>(), outer, R, inner, current_stream());
  CHECK_LAUNCH();
  return y;
}

REGISTER_BINDING(sum_dim, sum_dim_forward)
