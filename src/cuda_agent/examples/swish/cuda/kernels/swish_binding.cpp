#include "binding_registry.h"

extern "C" void swish_launch(const float* x, float* y, int64_t n, cudaStream_t stream);

at::Tensor swish_forward(const at::Tensor& x) {
  CHECK_CUDA(x);
  CHECK_CONTIGUOUS(x);
  CHECK_DTYPE(x, at::kFloat);
  auto y = at::empty_like(x);
  c10::cuda::CUDAGuard guard(x.device());
  swish_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), current_stream());
  CHECK_LAUNCH();
  return y;
}

REGISTER_BINDING(swish, swish_forward)
