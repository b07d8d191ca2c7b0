#include <cudnn.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <cstddef>

// y = relu(conv2d(x, w, b, stride 1, padding pad)), fp32 NCHW, under the `paper` rules profile
// (cuDNN for the convolution only):
//  * the convolution is cudnnConvolutionForward (cross-correlation, as torch), on the caller's
//    stream, with the algorithm cuDNN's heuristics rank first for the shape; descriptors, the
//    algorithm and the workspace are made once per shape and kept (a few shapes per device);
//  * math type CUDNN_DEFAULT_MATH: TF32 tensor cores where cuDNN picks them, as torch's
//    default for fp32 convolutions (torch.backends.cudnn.allow_tf32 = True);
//  * bias + ReLU is our own in-place pass (cudnnAddTensor / cudnnActivationForward /
//    cudnnConvolutionBiasActivationForward are not allowed: compute outside the convolution).

namespace {

struct Plan {
  int64_t key[7] = {-1, -1, -1, -1, -1, -1, -1};  // N, Cin, H, W, Cout, KS, pad
  cudnnTensorDescriptor_t xd = nullptr, yd = nullptr;
  cudnnFilterDescriptor_t wd = nullptr;
  cudnnConvolutionDescriptor_t cd = nullptr;
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  size_t ws_bytes = 0;
};

constexpr int kDevices = 64;
constexpr int kPlans = 8;

struct DeviceState {
  cudnnHandle_t handle = nullptr;
  Plan plans[kPlans];
  int next = 0;             // the slot the next new shape takes (round robin)
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

DeviceState g_state[kDevices];

bool same(const int64_t* a, const int64_t* b) {
  for (int i = 0; i < 7; ++i)
    if (a[i] != b[i]) return false;
  return true;
}

void release(Plan& p) {
  if (p.xd) cudnnDestroyTensorDescriptor(p.xd);
  if (p.yd) cudnnDestroyTensorDescriptor(p.yd);
  if (p.wd) cudnnDestroyFilterDescriptor(p.wd);
  if (p.cd) cudnnDestroyConvolutionDescriptor(p.cd);
  p = Plan();
}

// descriptors + algorithm for one shape; false on any cuDNN error
bool make_plan(cudnnHandle_t h, Plan& p, const int64_t* key) {
  const int N = (int)key[0], C = (int)key[1], H = (int)key[2], W = (int)key[3], K = (int)key[4], S = (int)key[5],
            pad = (int)key[6];
  const int OH = H + 2 * pad - S + 1, OW = W + 2 * pad - S + 1;
  if (cudnnCreateTensorDescriptor(&p.xd) != CUDNN_STATUS_SUCCESS ||
      cudnnCreateTensorDescriptor(&p.yd) != CUDNN_STATUS_SUCCESS ||
      cudnnCreateFilterDescriptor(&p.wd) != CUDNN_STATUS_SUCCESS ||
      cudnnCreateConvolutionDescriptor(&p.cd) != CUDNN_STATUS_SUCCESS)
    return false;
  if (cudnnSetTensor4dDescriptor(p.xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, C, H, W) != CUDNN_STATUS_SUCCESS ||
      cudnnSetTensor4dDescriptor(p.yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, K, OH, OW) != CUDNN_STATUS_SUCCESS ||
      cudnnSetFilter4dDescriptor(p.wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, K, C, S, S) != CUDNN_STATUS_SUCCESS ||
      cudnnSetConvolution2dDescriptor(p.cd, pad, pad, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT) !=
          CUDNN_STATUS_SUCCESS ||
      cudnnSetConvolutionMathType(p.cd, CUDNN_DEFAULT_MATH) != CUDNN_STATUS_SUCCESS)
    return false;
  int on, oc, oh, ow;  // cuDNN's own view of the output must be ours
  if (cudnnGetConvolution2dForwardOutputDim(p.cd, p.xd, p.wd, &on, &oc, &oh, &ow) != CUDNN_STATUS_SUCCESS ||
      on != N || oc != K || oh != OH || ow != OW)
    return false;
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int found = 0;
  if (cudnnGetConvolutionForwardAlgorithm_v7(h, p.xd, p.wd, p.cd, p.yd, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found,
                                             perf) != CUDNN_STATUS_SUCCESS)
    return false;
  for (int i = 0; i < found; ++i) {  // ranked best first; take the first that works for this shape
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    size_t bytes = 0;
    if (cudnnGetConvolutionForwardWorkspaceSize(h, p.xd, p.wd, p.cd, p.yd, perf[i].algo, &bytes) !=
        CUDNN_STATUS_SUCCESS)
      continue;
    p.algo = perf[i].algo;
    p.ws_bytes = bytes;
    for (int j = 0; j < 7; ++j) p.key[j] = key[j];
    return true;
  }
  return false;
}

// in place: y[n, c, :, :] = relu(y[n, c, :, :] + b[c]); one block per (n, c) plane (strided)
__global__ void bias_relu_vec4(float* __restrict__ y, const float* __restrict__ b, int64_t planes, int64_t C,
                               int64_t HW) {
  const int64_t n4 = HW / 4;
  for (int64_t p = blockIdx.x; p < planes; p += gridDim.x) {
    const float bias = __ldg(b + p % C);
    float4* row = reinterpret_cast<float4*>(y + p * HW);
    for (int64_t i = threadIdx.x; i < n4; i += blockDim.x) {
      float4 v = row[i];
      v.x = fmaxf(v.x + bias, 0.f);
      v.y = fmaxf(v.y + bias, 0.f);
      v.z = fmaxf(v.z + bias, 0.f);
      v.w = fmaxf(v.w + bias, 0.f);
      row[i] = v;
    }
  }
}

__global__ void bias_relu_scalar(float* __restrict__ y, const float* __restrict__ b, int64_t planes, int64_t C,
                                 int64_t HW) {
  for (int64_t p = blockIdx.x; p < planes; p += gridDim.x) {
    const float bias = __ldg(b + p % C);
    float* row = y + p * HW;
    for (int64_t i = threadIdx.x; i < HW; i += blockDim.x) row[i] = fmaxf(row[i] + bias, 0.f);
  }
}

}  // namespace

// returns 0 on success, else a cudnnStatus_t / cudaError_t (or -1: sizes out of range, no plan)
extern "C" int conv2d_relu_launch(const float* x, const float* w, const float* b, float* y, int64_t N, int64_t Cin,
                                  int64_t H, int64_t W, int64_t Cout, int64_t KS, int64_t pad, cudaStream_t stream) {
  const int64_t OH = H + 2 * pad - KS + 1, OW = W + 2 * pad - KS + 1;
  if (N <= 0 || Cout <= 0 || OH <= 0 || OW <= 0) return 0;
  const int64_t dims[] = {N, Cin, H, W, Cout, KS, pad};
  for (int64_t d : dims)
    if (d < 0 || d > INT32_MAX) return -1;
  int device = 0;
  cudaGetDevice(&device);
  if (device < 0 || device >= kDevices) return -1;
  DeviceState& s = g_state[device];
  if (!s.handle && cudnnCreate(&s.handle) != CUDNN_STATUS_SUCCESS) {
    s.handle = nullptr;
    return -1;
  }
  Plan* plan = nullptr;
  for (Plan& p : s.plans)
    if (same(p.key, dims)) plan = &p;
  if (!plan) {
    plan = &s.plans[s.next];
    s.next = (s.next + 1) % kPlans;
    release(*plan);
    if (!make_plan(s.handle, *plan, dims)) {
      release(*plan);
      return -1;
    }
  }
  if (plan->ws_bytes > s.workspace_bytes) {  // grows once per larger shape, kept afterwards
    cudaStreamSynchronize(stream);  // a smaller workspace may still be in use on this stream
    if (s.workspace) cudaFree(s.workspace);
    s.workspace = nullptr;
    s.workspace_bytes = 0;
    cudaError_t e = cudaMalloc(&s.workspace, plan->ws_bytes);
    if (e != cudaSuccess) return (int)e;
    s.workspace_bytes = plan->ws_bytes;
  }
  cudnnStatus_t st = cudnnSetStream(s.handle, stream);
  if (st != CUDNN_STATUS_SUCCESS) return (int)st;
  const float alpha = 1.f, beta = 0.f;
  if (Cin > 0) {
    st = cudnnConvolutionForward(s.handle, &alpha, plan->xd, x, plan->wd, w, plan->cd, plan->algo, s.workspace,
                                 plan->ws_bytes, &beta, plan->yd, y);
    if (st != CUDNN_STATUS_SUCCESS) return (int)st;
  } else {
    cudaMemsetAsync(y, 0, sizeof(float) * (size_t)(N * Cout * OH * OW), stream);  // empty sum
  }
  const int64_t planes = N * Cout, HW = OH * OW;
  const bool vec = HW % 4 == 0 && (reinterpret_cast<uintptr_t>(y) & 15) == 0;
  int sms = 132;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  const int64_t cap = (int64_t)sms * 16;
  const unsigned blocks = (unsigned)(planes < cap ? planes : cap);
  const int threads = HW >= 1024 ? 256 : 128;
  if (vec) bias_relu_vec4<<<blocks, threads, 0, stream>>>(y, b, planes, Cout, HW);
  else bias_relu_scalar<<<blocks, threads, 0, stream>>>(y, b, planes, Cout, HW);
  return 0;
}
