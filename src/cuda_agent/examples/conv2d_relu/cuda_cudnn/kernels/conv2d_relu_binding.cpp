#include "binding_registry.h"

extern "C" int conv2d_relu_launch(const float* x, const float* w, const float* b, float* y, int64_t N, int64_t Cin,
                                  int64_t H, int64_t W, int64_t Cout, int64_t KS, int64_t pad, cudaStream_t stream);

// relu(conv2d(x, weight, bias, stride=1, padding=pad)) for NCHW x and a square kernel
at::Tensor conv2d_relu_forward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, int64_t pad) {
  CHECK_CUDA(x);
  CHECK_CUDA(weight);
  CHECK_CUDA(bias);
  CHECK_CONTIGUOUS(x);
  CHECK_CONTIGUOUS(weight);
  CHECK_CONTIGUOUS(bias);
  CHECK_DTYPE(x, at::kFloat);
  CHECK_DTYPE(weight, at::kFloat);
  CHECK_DTYPE(bias, at::kFloat);
  TORCH_CHECK(x.dim() == 4 && weight.dim() == 4 && bias.dim() == 1, "expected NCHW x, OIHW weight, 1-D bias");
  const int64_t N = x.size(0), Cin = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t Cout = weight.size(0), KS = weight.size(2);
  TORCH_CHECK(weight.size(1) == Cin && weight.size(3) == KS && bias.size(0) == Cout, "shape mismatch");
  TORCH_CHECK(KS >= 1, "empty kernel");
  TORCH_CHECK(pad >= 0, "negative padding");
  const int64_t OH = H + 2 * pad - KS + 1, OW = W + 2 * pad - KS + 1;
  TORCH_CHECK(OH > 0 && OW > 0, "kernel larger than the padded input");
  auto y = at::empty({N, Cout, OH, OW}, x.options());
  if (y.numel() == 0) return y;
  c10::cuda::CUDAGuard guard(x.device());
  const int status = conv2d_relu_launch(x.data_ptr<float>(), weight.data_ptr<float>(), bias.data_ptr<float>(),
                                        y.data_ptr<float>(), N, Cin, H, W, Cout, KS, pad, current_stream());
  TORCH_CHECK(status == 0, "conv2d_relu: unsupported sizes");
  CHECK_LAUNCH();
  return y;
}

REGISTER_BINDING(conv2d_relu, conv2d_relu_forward)
