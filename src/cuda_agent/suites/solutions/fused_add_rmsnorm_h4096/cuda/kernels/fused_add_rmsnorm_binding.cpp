#include "binding_registry.h"

extern "C" void fused_add_rmsnorm_launch(const void* x, const void* r, const void* w, void* y, int64_t rows,
                                         int64_t cols, bool vectorized, float eps, cudaStream_t stream);

// The definition's constant (its reference adds 1e-5 to the mean square).
constexpr float kEps = 1e-5f;

static bool aligned16(const at::Tensor& t) { return reinterpret_cast<std::uintptr_t>(t.data_ptr()) % 16 == 0; }

// y = rmsnorm(hidden_states + residual) * weight, rows of any count, any width
at::Tensor fused_add_rmsnorm_forward(const at::Tensor& hidden_states, const at::Tensor& residual,
                                     const at::Tensor& weight) {
  CHECK_CUDA(hidden_states);
  CHECK_CUDA(residual);
  CHECK_CUDA(weight);
  CHECK_CONTIGUOUS(hidden_states);
  CHECK_CONTIGUOUS(residual);
  CHECK_CONTIGUOUS(weight);
  CHECK_DTYPE(hidden_states, at::kBFloat16);
  CHECK_DTYPE(residual, at::kBFloat16);
  CHECK_DTYPE(weight, at::kBFloat16);
  TORCH_CHECK(hidden_states.dim() == 2, "hidden_states must be [batch_size, hidden_size]");
  TORCH_CHECK(residual.sizes() == hidden_states.sizes(), "residual must match hidden_states");
  const int64_t rows = hidden_states.size(0), cols = hidden_states.size(1);
  TORCH_CHECK(weight.numel() == cols, "weight must have hidden_size elements");
  TORCH_CHECK(rows < (1LL << 31), "too many rows");
  auto out = at::empty_like(hidden_states);
  if (rows == 0 || cols == 0) return out;
  c10::cuda::CUDAGuard guard(hidden_states.device());
  const bool vectorized = cols % 8 == 0 && aligned16(hidden_states) && aligned16(residual) && aligned16(weight) &&
                          aligned16(out);
  fused_add_rmsnorm_launch(hidden_states.data_ptr(), residual.data_ptr(), weight.data_ptr(), out.data_ptr(), rows,
                           cols, vectorized, kEps, current_stream());
  CHECK_LAUNCH();
  return out;
}

REGISTER_BINDING(fused_add_rmsnorm, fused_add_rmsnorm_forward)
