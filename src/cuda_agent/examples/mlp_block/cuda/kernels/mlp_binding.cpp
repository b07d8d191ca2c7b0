#include "binding_registry.h"

extern "C" int mlp_block_launch(const float* x, const float* ln_w, const float* ln_b, float eps, const float* w1,
                                const float* b1, const float* w2, const float* b2, float* xn, float* h, float* y,
                                int64_t M, int64_t D, int64_t H, cudaStream_t stream);

static void check_f32(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.is_cuda(), name, " must be a CUDA tensor");
  TORCH_CHECK(t.is_contiguous(), name, " must be contiguous");
  TORCH_CHECK(t.scalar_type() == at::kFloat, name, " must be float32");
}

// x + fc2(gelu(fc1(layer_norm(x)))) for x [..., D], fc1: [H, D], fc2: [D, H]
at::Tensor mlp_block_forward(const at::Tensor& x, const at::Tensor& ln_w, const at::Tensor& ln_b, double eps,
                             const at::Tensor& w1, const at::Tensor& b1, const at::Tensor& w2, const at::Tensor& b2) {
  check_f32(x, "x");
  check_f32(ln_w, "ln_w");
  check_f32(ln_b, "ln_b");
  check_f32(w1, "w1");
  check_f32(b1, "b1");
  check_f32(w2, "w2");
  check_f32(b2, "b2");
  TORCH_CHECK(x.dim() >= 1 && w1.dim() == 2 && w2.dim() == 2, "bad ranks");
  const int64_t D = x.size(-1), H = w1.size(0);
  TORCH_CHECK(ln_w.numel() == D && ln_b.numel() == D, "layer norm shape mismatch");
  TORCH_CHECK(w1.size(1) == D && b1.numel() == H && w2.size(0) == D && w2.size(1) == H && b2.numel() == D,
              "linear shape mismatch");
  auto y = at::empty_like(x);
  if (x.numel() == 0) return y;
  const int64_t M = x.numel() / D;
  TORCH_CHECK(M < (1LL << 31), "too many rows");
  auto xn = at::empty({M, D}, x.options());
  auto h = at::empty({M, H}, x.options());
  c10::cuda::CUDAGuard guard(x.device());
  const int status = mlp_block_launch(x.data_ptr<float>(), ln_w.data_ptr<float>(), ln_b.data_ptr<float>(), (float)eps,
                                      w1.data_ptr<float>(), b1.data_ptr<float>(), w2.data_ptr<float>(),
                                      b2.data_ptr<float>(), xn.data_ptr<float>(), h.data_ptr<float>(),
                                      y.data_ptr<float>(), M, D, H, current_stream());
  TORCH_CHECK(status == 0, "mlp_block: sizes out of range");
  CHECK_LAUNCH();
  return y;
}

REGISTER_BINDING(mlp_block, mlp_block_forward)
