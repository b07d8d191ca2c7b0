#include "binding_registry.h"

extern "C" void layernorm_rows(const float* x, const float* w, const float* b, float* y,
                               int64_t rows, int64_t cols, float eps);

// LayerNorm over the last dimension with elementwise affine weight and bias
at::Tensor layernorm_forward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps) {
  CHECK_CONTIGUOUS(x);
  CHECK_CONTIGUOUS(weight);
  CHECK_CONTIGUOUS(bias);
  CHECK_DTYPE(x, at::kFloat);
  CHECK_DTYPE(weight, at::kFloat);
  CHECK_DTYPE(bias, at::kFloat);
  TORCH_CHECK(x.dim() >= 1, "x must have at least one dimension");
  const int64_t cols = x.size(-1);
  TORCH_CHECK(weight.numel() == cols && bias.numel() == cols, "weight/bias must match the last dimension");
  auto y = at::empty_like(x);
  if (x.numel() == 0) return y;
  layernorm_rows(x.data_ptr<float>(), weight.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>(),
                 x.numel() / cols, cols, (float)eps);
  return y;
}

REGISTER_BINDING(layernorm, layernorm_forward)
