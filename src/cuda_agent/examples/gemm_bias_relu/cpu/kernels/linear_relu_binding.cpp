#include "binding_registry.h"

extern "C" void linear_relu_kernel(const float* x, const float* w, const float* b, float* y, int64_t M,
                                   int64_t K, int64_t N);

// relu(x @ weight^T + bias) for x [..., K], weight [N, K], bias [N]
at::Tensor linear_relu_forward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  CHECK_CONTIGUOUS(x);
  CHECK_CONTIGUOUS(weight);
  CHECK_CONTIGUOUS(bias);
  CHECK_DTYPE(x, at::kFloat);
  CHECK_DTYPE(weight, at::kFloat);
  CHECK_DTYPE(bias, at::kFloat);
  TORCH_CHECK(x.dim() >= 1 && weight.dim() == 2 && bias.dim() == 1, "bad ranks");
  const int64_t K = x.size(-1);
  const int64_t N = weight.size(0);
  TORCH_CHECK(weight.size(1) == K && bias.size(0) == N, "shape mismatch");
  const int64_t M = K > 0 ? x.numel() / K : 0;
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = N;
  auto y = at::empty(shape, x.options());
  if (y.numel() == 0) return y;
  linear_relu_kernel(x.data_ptr<float>(), weight.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>(),
                     M, K, N);
  return y;
}

REGISTER_BINDING(linear_relu, linear_relu_forward)
