#include "binding_registry.h"

extern "C" int matmul_gelu_launch(const float* a, const float* b, float* y, int64_t M, int64_t K, int64_t N,
                                  float scale, cudaStream_t stream);

// gelu(scale * (a @ b)) for a [M, K], b [K, N]
at::Tensor matmul_gelu_forward(const at::Tensor& a, const at::Tensor& b, double scale) {
  CHECK_CUDA(a);
  CHECK_CUDA(b);
  CHECK_CONTIGUOUS(a);
  CHECK_CONTIGUOUS(b);
  CHECK_DTYPE(a, at::kFloat);
  CHECK_DTYPE(b, at::kFloat);
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "expected a [M, K] and b [K, N]");
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  auto y = at::empty({M, N}, a.options());
  if (y.numel() == 0) return y;
  c10::cuda::CUDAGuard guard(a.device());
  const int status = matmul_gelu_launch(a.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(), M, K, N,
                                        (float)scale, current_stream());
  TORCH_CHECK(status == 0, "matmul_gelu: sizes out of range");
  CHECK_LAUNCH();
  return y;
}

REGISTER_BINDING(matmul_gelu, matmul_gelu_forward)
