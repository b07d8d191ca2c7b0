#include "binding_registry.h"

extern "C" void swish_kernel(const float* x, float* y, int64_t n);

at::Tensor swish_forward(const at::Tensor& x) {
  CHECK_CONTIGUOUS(x);
  CHECK_DTYPE(x, at::kFloat);
  auto y = at::empty_like(x);
  swish_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}

REGISTER_BINDING(swish, swish_forward)
