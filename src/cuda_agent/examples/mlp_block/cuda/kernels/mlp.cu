#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cstdint>

// Pre-norm MLP block: y = x + fc2(gelu(fc1(layer_norm(x)))), fp32, in four launches:
//  1. ln_residual: one warp per row (row in registers) writes xn = LN(x) and, from the same
//     read of x, y = x + b2 (the residual and fc2's bias, ready to be accumulated onto);
//  2. cuBLAS SGEMM  h = xn @ W1^T;
//  3. bias_gelu: h = gelu(h + b1) in place (exact erf GELU), float4 accesses;
//  4. cuBLAS SGEMM  y = h @ W2^T + 1 * y   (beta = 1 adds the residual and bias for free).
// Eager runs five kernels (layer_norm, addmm, gelu, addmm, add); this saves the final add's
// full read-read-write pass. cuBLAS runs in full fp32 (no TF32), on the caller's stream.
// cuBLAS is column-major: the row-major [M, N] result of a [M, K] @ W[N, K]^T is the
// column-major N x M product W (OP_T of the K x N column-major view, ld K) x a^T (ld K).

static cublasHandle_t get_handle(int device) {
  static cublasHandle_t handles[64] = {};
  if (device < 0 || device >= 64) return nullptr;
  if (!handles[device]) {
    cublasHandle_t h = nullptr;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return nullptr;
    cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);  // no TF32: match torch's fp32 matmul
    handles[device] = h;
  }
  return handles[device];
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float gelu_erf(float v) { return 0.5f * v * (1.f + erff(v * 0.70710678118654752f)); }

// rows of D <= 32 * 4 * VPT floats, D % 4 == 0, all pointers 16-byte aligned
template <int VPT>
__global__ void __launch_bounds__(128) ln_residual_warp(const float* __restrict__ x, const float* __restrict__ g,
                                                        const float* __restrict__ be, const float* __restrict__ b2,
                                                        float* __restrict__ xn, float* __restrict__ y, int64_t rows,
                                                        int D, float eps) {
  const int lane = threadIdx.x & 31;
  const int64_t row = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (row >= rows) return;  // whole warps leave together
  const int d4 = D >> 2;
  const float4* xr = reinterpret_cast<const float4*>(x + row * D);
  float4* xnr = reinterpret_cast<float4*>(xn + row * D);
  float4* yr = reinterpret_cast<float4*>(y + row * D);
  const float4* g4 = reinterpret_cast<const float4*>(g);
  const float4* be4 = reinterpret_cast<const float4*>(be);
  const float4* b24 = reinterpret_cast<const float4*>(b2);

  float4 v[VPT];
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int idx = lane + i * 32;
    if (idx < d4) {
      v[i] = __ldg(xr + idx);
      const float4 c = __ldg(b24 + idx);
      yr[idx] = make_float4(v[i].x + c.x, v[i].y + c.y, v[i].z + c.z, v[i].w + c.w);
      s += (v[i].x + v[i].y) + (v[i].z + v[i].w);
    }
  }
  const float inv_n = 1.f / (float)D;
  const float mean = warp_sum(s) * inv_n;
  float ss = 0.f;
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int idx = lane + i * 32;
    if (idx < d4) {
      v[i].x -= mean; v[i].y -= mean; v[i].z -= mean; v[i].w -= mean;
      ss += (v[i].x * v[i].x + v[i].y * v[i].y) + (v[i].z * v[i].z + v[i].w * v[i].w);
    }
  }
  const float rstd = rsqrtf(warp_sum(ss) * inv_n + eps);
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int idx = lane + i * 32;
    if (idx < d4) {
      const float4 a = __ldg(g4 + idx), c = __ldg(be4 + idx);
      xnr[idx] = make_float4(v[i].x * rstd * a.x + c.x, v[i].y * rstd * a.y + c.y, v[i].z * rstd * a.z + c.z,
                             v[i].w * rstd * a.w + c.w);
    }
  }
}

__device__ float block_sum(float v, float* smem) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  v = warp_sum(v);
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  float r = lane < nwarps ? smem[lane] : 0.f;
  r = warp_sum(r);
  __syncthreads();  // smem is reused by the next reduction
  return r;
}

// any D, any alignment: one block per row, sweeps re-reading the row from L1/L2
__global__ void __launch_bounds__(256) ln_residual_block(const float* __restrict__ x, const float* __restrict__ g,
                                                         const float* __restrict__ be, const float* __restrict__ b2,
                                                         float* __restrict__ xn, float* __restrict__ y, int64_t D,
                                                         float eps) {
  __shared__ float smem[32];
  const int64_t row = blockIdx.x;
  const float* xr = x + row * D;
  float s = 0.f;
  for (int64_t c = threadIdx.x; c < D; c += blockDim.x) {
    const float v = xr[c];
    y[row * D + c] = v + b2[c];
    s += v;
  }
  const float mean = block_sum(s, smem) / (float)D;
  float ss = 0.f;
  for (int64_t c = threadIdx.x; c < D; c += blockDim.x) {
    const float d = xr[c] - mean;
    ss += d * d;
  }
  const float rstd = rsqrtf(block_sum(ss, smem) / (float)D + eps);
  for (int64_t c = threadIdx.x; c < D; c += blockDim.x) xn[row * D + c] = (xr[c] - mean) * rstd * g[c] + be[c];
}

// h[m, :] = gelu(h[m, :] + b); blocks stride over rows, threads over columns
__global__ void bias_gelu_vec4(float* __restrict__ h, const float* __restrict__ b, int64_t M, int64_t N) {
  const int64_t n4 = N / 4;
  const float4* b4 = reinterpret_cast<const float4*>(b);
  for (int64_t m = blockIdx.x; m < M; m += gridDim.x) {
    float4* row = reinterpret_cast<float4*>(h + m * N);
    for (int64_t c = threadIdx.x; c < n4; c += blockDim.x) {
      float4 v = row[c];
      const float4 bb = __ldg(b4 + c);
      v.x = gelu_erf(v.x + bb.x);
      v.y = gelu_erf(v.y + bb.y);
      v.z = gelu_erf(v.z + bb.z);
      v.w = gelu_erf(v.w + bb.w);
      row[c] = v;
    }
  }
}

__global__ void bias_gelu_scalar(float* __restrict__ h, const float* __restrict__ b, int64_t M, int64_t N) {
  for (int64_t m = blockIdx.x; m < M; m += gridDim.x) {
    float* row = h + m * N;
    for (int64_t c = threadIdx.x; c < N; c += blockDim.x) row[c] = gelu_erf(row[c] + __ldg(b + c));
  }
}

template <int VPT>
static void launch_ln(const float* x, const float* g, const float* be, const float* b2, float* xn, float* y,
                      int64_t M, int D, float eps, cudaStream_t stream) {
  const int64_t blocks = (M + 3) / 4;
  ln_residual_warp<VPT><<<(unsigned)blocks, 128, 0, stream>>>(x, g, be, b2, xn, y, M, D, eps);
}

static bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// xn [M, D] and h [M, H] are scratch; returns 0 on success, a cublasStatus_t or -1 otherwise
extern "C" int mlp_block_launch(const float* x, const float* ln_w, const float* ln_b, float eps, const float* w1,
                                const float* b1, const float* w2, const float* b2, float* xn, float* h, float* y,
                                int64_t M, int64_t D, int64_t H, cudaStream_t stream) {
  if (M <= 0 || D <= 0) return 0;
  if (M > INT32_MAX || D > INT32_MAX || H > INT32_MAX) return -1;
  int device = 0;
  cudaGetDevice(&device);
  cublasHandle_t handle = get_handle(device);
  if (!handle) return -1;
  cublasStatus_t st = cublasSetStream(handle, stream);
  if (st != CUBLAS_STATUS_SUCCESS) return (int)st;

  // 1. xn = LN(x); y = x + b2
  const bool ln_vec = D % 4 == 0 && D <= 2048 && aligned16(x) && aligned16(ln_w) && aligned16(ln_b) &&
                      aligned16(b2) && aligned16(xn) && aligned16(y);
  if (ln_vec) {
    const int d = (int)D;
    if (d <= 128) launch_ln<1>(x, ln_w, ln_b, b2, xn, y, M, d, eps, stream);
    else if (d <= 256) launch_ln<2>(x, ln_w, ln_b, b2, xn, y, M, d, eps, stream);
    else if (d <= 512) launch_ln<4>(x, ln_w, ln_b, b2, xn, y, M, d, eps, stream);
    else if (d <= 1024) launch_ln<8>(x, ln_w, ln_b, b2, xn, y, M, d, eps, stream);
    else launch_ln<16>(x, ln_w, ln_b, b2, xn, y, M, d, eps, stream);
  } else {
    ln_residual_block<<<(unsigned)M, 256, 0, stream>>>(x, ln_w, ln_b, b2, xn, y, D, eps);
  }
  if (H <= 0) return 0;  // fc2 of an empty hidden layer adds nothing

  const float one = 1.f, zero = 0.f;
  // 2. h = xn @ W1^T            (column-major: h^T [H x M] = W1 (OP_T, ld D) * xn^T (ld D))
  st = cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, (int)H, (int)M, (int)D, &one, w1, (int)D, xn, (int)D, &zero, h,
                   (int)H);
  if (st != CUBLAS_STATUS_SUCCESS) return (int)st;
  // 3. h = gelu(h + b1)
  const int64_t blocks = M < 132 * 8 ? M : 132 * 8;
  if (H % 4 == 0 && aligned16(h) && aligned16(b1)) bias_gelu_vec4<<<(unsigned)blocks, 128, 0, stream>>>(h, b1, M, H);
  else bias_gelu_scalar<<<(unsigned)blocks, 128, 0, stream>>>(h, b1, M, H);
  // 4. y += h @ W2^T            (column-major: y^T [D x M] += W2 (OP_T, ld H) * h^T (ld H))
  st = cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, (int)D, (int)M, (int)H, &one, w2, (int)H, h, (int)H, &one, y,
                   (int)D);
  if (st != CUBLAS_STATUS_SUCCESS) return (int)st;
  return 0;
}
