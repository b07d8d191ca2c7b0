#include <cuda_runtime.h>
#include <cstdint>

// Sum over one dimension of a contiguous tensor viewed as [outer, R, inner].
//  * inner > 1: a block owns 32*VEC adjacent output columns of one outer index; each lane
//    holds VEC columns (a float4 when inner % 4 == 0 and aligned), the WARPS warps split the
//    R rows between them (U independent 16-byte loads in flight per lane), and the warps'
//    partial sums meet in shared memory. Reads are fully coalesced along `inner`.
//  * inner == 1 (the last dimension): one warp per row, lanes stride the row, shuffle sum.

constexpr int WARPS = 16;
constexpr int U = 4;

template <int VEC>
struct Vec;
template <>
struct Vec<1> {
  using T = float;
  __device__ static void add(float* acc, const float* p) { acc[0] += __ldg(p); }
};
template <>
struct Vec<4> {
  using T = float4;
  __device__ static void add(float* acc, const float* p) {
    const float4 v = __ldg(reinterpret_cast<const float4*>(p));
    acc[0] += v.x; acc[1] += v.y; acc[2] += v.z; acc[3] += v.w;
  }
};

template <int VEC>
__global__ void __launch_bounds__(WARPS * 32) sum_cols_kernel(const float* __restrict__ x, float* __restrict__ y,
                                                              int64_t R, int64_t inner, int64_t ntile) {
  __shared__ float part[WARPS][VEC * 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t o = blockIdx.x / ntile;
  const int64_t t = blockIdx.x % ntile;
  const int64_t c = t * (32 * VEC) + (int64_t)lane * VEC;  // first column of this lane
  // VEC == 4 only when inner % 4 == 0, so c < inner means all 4 columns are in range
  const bool active = c < inner;
  float acc[VEC];
#pragma unroll
  for (int j = 0; j < VEC; ++j) acc[j] = 0.f;
  if (active) {
    const float* base = x + o * R * inner + c;
    int64_t r = warp;
    // U loads per lane issued before they are consumed
    for (; r + (int64_t)(U - 1) * WARPS < R; r += (int64_t)U * WARPS) {
      float a[U][VEC];
#pragma unroll
      for (int u = 0; u < U; ++u) {
#pragma unroll
        for (int j = 0; j < VEC; ++j) a[u][j] = 0.f;
        Vec<VEC>::add(a[u], base + (r + (int64_t)u * WARPS) * inner);
      }
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int j = 0; j < VEC; ++j) acc[j] += a[u][j];
    }
    for (; r < R; r += WARPS) Vec<VEC>::add(acc, base + r * inner);
  }
#pragma unroll
  for (int j = 0; j < VEC; ++j) part[warp][j * 32 + lane] = acc[j];  // conflict-free
  __syncthreads();
  if (warp == 0 && active) {
    float s[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      s[j] = 0.f;
#pragma unroll
      for (int w = 0; w < WARPS; ++w) s[j] += part[w][j * 32 + lane];
    }
    float* out = y + o * inner + c;
    if constexpr (VEC == 4) {
      *reinterpret_cast<float4*>(out) = make_float4(s[0], s[1], s[2], s[3]);
    } else {
      out[0] = s[0];
    }
  }
}

__global__ void __launch_bounds__(256) sum_rows_kernel(const float* __restrict__ x, float* __restrict__ y,
                                                       int64_t outer, int64_t R) {
  const int lane = threadIdx.x & 31;
  const int64_t row = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (row >= outer) return;  // whole warps leave together
  const float* xr = x + row * R;
  float s = 0.f;
  for (int64_t r = lane; r < R; r += 32) s += __ldg(xr + r);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
  if (lane == 0) y[row] = s;
}

extern "C" void sum_dim_launch(const float* x, float* y, int64_t outer, int64_t R, int64_t inner,
                               cudaStream_t stream) {
  if (outer <= 0 || inner <= 0 || R <= 0) return;
  if (inner == 1) {
    const int64_t blocks = (outer + 7) / 8;
    sum_rows_kernel<<<(unsigned)blocks, 256, 0, stream>>>(x, y, outer, R);
    return;
  }
  const bool aligned = ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) & 15) == 0;
  if (aligned && inner % 4 == 0) {
    const int64_t ntile = (inner + 127) / 128;
    sum_cols_kernel<4><<<(unsigned)(outer * ntile), WARPS * 32, 0, stream>>>(x, y, R, inner, ntile);
  } else {
    const int64_t ntile = (inner + 31) / 32;
    sum_cols_kernel<1><<<(unsigned)(outer * ntile), WARPS * 32, 0, stream>>>(x, y, R, inner, ntile);
  }
}
