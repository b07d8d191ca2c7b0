#include "binding_registry.h"

extern "C" int linear_relu_launch(const float* x, const float* w, const float* b, float* y, int64_t M, int64_t K,
                                  int64_t N, cudaStream_t stream);

// relu(x @ weight^T + bias) for x [..., K], weight [N, K], bias [N]
at::Tensor linear_relu_forward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  CHECK_CUDA(x);
  CHECK_CUDA(weight);
  CHECK_CUDA(bias);
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
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = N;
  auto y = at::empty(shape, x.options());
  if (y.numel() == 0) return y;
  const int64_t M = y.numel() / N;
  c10::cuda::CUDAGuard guard(x.device());
  const int status = linear_relu_launch(x.data_ptr<float>(), weight.data_ptr<float>(), bias.data_ptr<float>(),
                                        y.data_ptr<float>(), M, K, N, current_stream());
  TORCH_CHECK(status == 0, "linear_relu: sizes out of range");
  CHECK_LAUNCH();
  return y;
}

REGISTER_BINDING(linear_relu, linear_relu_forward)
