#include <cuda_runtime.h>
#include <cstdint>
#include <math.h>

// Row softmax over the last dimension.
//  * rows of at most 2048 floats (cols % 4 == 0, 16-byte aligned): one warp per row; the
//    row is read once into registers as float4s, max and sum are warp shuffles, and the
//    result is written once: exactly one read and one write of global memory.
//  * anything else: one block per row, three sweeps (max, sum, write) that re-read the
//    row from L1/L2.

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// VPT float4s per lane: the row holds at most 32 * 4 * VPT floats.
template <int VPT>
__global__ void __launch_bounds__(128) softmax_warp_kernel(const float* __restrict__ x, float* __restrict__ y,
                                                           int64_t rows, int cols) {
  const int lane = threadIdx.x & 31;
  const int64_t row = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (row >= rows) return;  // whole warps leave together: the shuffles below stay full-warp
  const int c4 = cols >> 2;
  const float4* xr = reinterpret_cast<const float4*>(x + row * cols);
  float4* yr = reinterpret_cast<float4*>(y + row * cols);

  float4 v[VPT];
  float m = -INFINITY;
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int idx = lane + i * 32;
    if (idx < c4) {
      v[i] = __ldg(xr + idx);
      m = fmaxf(m, fmaxf(fmaxf(v[i].x, v[i].y), fmaxf(v[i].z, v[i].w)));
    }
  }
  m = warp_max(m);
  // an all -inf row: exp(-inf - -inf) = NaN everywhere, as torch gives
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int idx = lane + i * 32;
    if (idx < c4) {
      v[i].x = __expf(v[i].x - m);
      v[i].y = __expf(v[i].y - m);
      v[i].z = __expf(v[i].z - m);
      v[i].w = __expf(v[i].w - m);
      s += (v[i].x + v[i].y) + (v[i].z + v[i].w);
    }
  }
  s = warp_sum(s);
  const float inv = 1.f / s;
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int idx = lane + i * 32;
    if (idx < c4) {
      float4 o = v[i];
      o.x *= inv; o.y *= inv; o.z *= inv; o.w *= inv;
      yr[idx] = o;
    }
  }
}

// block-wide reduction through shared memory; every thread gets the result
template <bool IS_MAX>
__device__ float block_reduce(float v, float* smem) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  v = IS_MAX ? warp_max(v) : warp_sum(v);
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  float r = lane < nwarps ? smem[lane] : (IS_MAX ? -INFINITY : 0.f);
  r = IS_MAX ? warp_max(r) : warp_sum(r);
  __syncthreads();  // smem is reused by the next reduction
  return r;
}

__global__ void __launch_bounds__(256) softmax_block_kernel(const float* __restrict__ x, float* __restrict__ y,
                                                            int64_t cols) {
  __shared__ float smem[32];
  const int64_t row = blockIdx.x;
  const float* xr = x + row * cols;
  float* yr = y + row * cols;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
  m = block_reduce<true>(m, smem);
  float s = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += __expf(xr[c] - m);
  s = block_reduce<false>(s, smem);
  const float inv = 1.f / s;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = __expf(xr[c] - m) * inv;
}

template <int VPT>
static void launch_warp(const float* x, float* y, int64_t rows, int cols, cudaStream_t stream) {
  const int warps_per_block = 4;
  const int64_t blocks = (rows + warps_per_block - 1) / warps_per_block;
  softmax_warp_kernel<VPT><<<(unsigned)blocks, warps_per_block * 32, 0, stream>>>(x, y, rows, cols);
}

extern "C" void softmax_launch(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  const bool aligned = ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) & 15) == 0;
  if (aligned && cols % 4 == 0 && cols <= 2048 && rows / 4 < 0x7fffffffLL) {
    const int c = (int)cols;
    if (c <= 128) launch_warp<1>(x, y, rows, c, stream);
    else if (c <= 256) launch_warp<2>(x, y, rows, c, stream);
    else if (c <= 512) launch_warp<4>(x, y, rows, c, stream);
    else if (c <= 1024) launch_warp<8>(x, y, rows, c, stream);
    else launch_warp<16>(x, y, rows, c, stream);
    return;
  }
  // rows map to blockIdx.x (limit 2^31 - 1)
  softmax_block_kernel<<<(unsigned)rows, 256, 0, stream>>>(x, y, cols);
}
