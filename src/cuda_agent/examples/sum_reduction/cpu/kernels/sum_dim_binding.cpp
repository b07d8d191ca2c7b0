#include "binding_registry.h"

extern "C" void sum_dim_kernel(const float* x, float* y, int64_t outer, int64_t R, int64_t inner);

// torch.sum(x, dim, keepdim=True) for a contiguous fp32 tensor
at::Tensor sum_dim_forward(const at::Tensor& x, int64_t dim) {
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
  auto y = at::empty(shape, x.options());
  if (y.numel() == 0) return y;
  if (R == 0) return at::zeros(shape, x.options());
  sum_dim_kernel(x.data_ptr<float>(), y.data_ptr<float>(), outer, R, inner);
  return y;
}

REGISTER_BINDING(sum_dim, sum_dim_forward)
