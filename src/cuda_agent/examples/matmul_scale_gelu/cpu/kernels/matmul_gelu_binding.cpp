#include "binding_registry.h"

extern "C" void matmul_gelu_kernel(const float* a, const float* b, float* y, int64_t M, int64_t K, int64_t N,
                                   float scale);

// gelu(scale * (a @ b)) for a [M, K], b [K, N]
at::Tensor matmul_gelu_forward(const at::Tensor& a, const at::Tensor& b, double scale) {
  CHECK_CONTIGUOUS(a);
  CHECK_CONTIGUOUS(b);
  CHECK_DTYPE(a, at::kFloat);
  CHECK_DTYPE(b, at::kFloat);
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "expected a [M, K] and b [K, N]");
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  auto y = at::empty({M, N}, a.options());
  if (y.numel() == 0) return y;
  matmul_gelu_kernel(a.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(), M, K, N, (float)scale);
  return y;
}

REGISTER_BINDING(matmul_gelu, matmul_gelu_forward)
