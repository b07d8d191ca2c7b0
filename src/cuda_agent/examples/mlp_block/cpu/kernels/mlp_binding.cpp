#include "binding_registry.h"

extern "C" void layer_norm_rows(const float* x, const float* w, const float* b, float* y, int64_t rows,
                                int64_t cols, float eps);
extern "C" void linear_fused(const float* a, const float* W, const float* bias, const float* residual, float* y,
                             int64_t M, int64_t K, int64_t N, int act);

static void check_f32(const at::Tensor& t, const char* name) {
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
  auto xn = at::empty({M, D}, x.options());
  auto h = at::empty({M, H}, x.options());
  layer_norm_rows(x.data_ptr<float>(), ln_w.data_ptr<float>(), ln_b.data_ptr<float>(), xn.data_ptr<float>(), M, D,
                  (float)eps);
  linear_fused(xn.data_ptr<float>(), w1.data_ptr<float>(), b1.data_ptr<float>(), nullptr, h.data_ptr<float>(), M, D,
               H, 1);
  linear_fused(h.data_ptr<float>(), w2.data_ptr<float>(), b2.data_ptr<float>(), x.data_ptr<float>(),
               y.data_ptr<float>(), M, H, D, 0);
  return y;
}

REGISTER_BINDING(mlp_block, mlp_block_forward)
