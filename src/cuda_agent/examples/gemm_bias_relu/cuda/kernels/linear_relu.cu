#include <cuda_runtime.h>
#include <cstdint>

// y = relu(x @ W^T + b), fp32: x [M, K] row-major, W [N, K] row-major (nn.Linear's layout), b [N].
//
// A tiled SGEMM with bias + ReLU fused into its epilogue, so the product never makes a round
// trip through global memory and there is one launch:
//  * a block computes a BM x BN tile of y; each of its threads a TM x TN sub-tile held in
//    registers, laid out as (TM/4) x (TN/4) groups of 4 x 4 spread across the tile, so its
//    shared-memory reads are float4s that are broadcast (x) or contiguous across the warp (W);
//  * k advances BK at a time through double-buffered shared memory: the next slab is fetched
//    from global into registers while the current one is multiplied, then stored to the other
//    buffer, one __syncthreads() per slab;
//  * both operands are k-contiguous in global memory (W^T is never materialised): consecutive
//    threads load consecutive k of a row (coalesced), and both slabs are stored transposed
//    (k-major) into shared memory, with 4 floats of padding per row;
//  * every global access is bounds-checked, so any M, N, K works (K == 0 gives relu(b)); the
//    output is written as float4s when N % 4 == 0 and y is 16-byte aligned.
// Full fp32 FMAs throughout (no TF32), like torch's default fp32 matmul.
// Two shapes, both 256 threads and k-slabs of 16: 128 x 64 tiles with 8 x 4 per thread when
// there are at least half as many tiles as SMs, else 64 x 64 tiles with 4 x 4 per thread.

template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
    linear_relu_kernel(const float* __restrict__ X, const float* __restrict__ W, const float* __restrict__ bias,
                       float* __restrict__ Y, int M, int N, int K, bool vec_store) {
  constexpr int NT = (BM / TM) * (BN / TN);
  constexpr int PAD = 4;
  constexpr int LA = BM * BK / NT;  // x-slab elements per thread
  constexpr int LB = BN * BK / NT;  // W-slab elements per thread
  constexpr int SUBM = BM / (TM / 4);  // row distance between a thread's 4-row groups
  constexpr int SUBN = BN / (TN / 4);
  static_assert((BM * BK) % NT == 0 && (BN * BK) % NT == 0, "slab must split evenly");
  static_assert(TM % 4 == 0 && TN % 4 == 0, "thread tile is made of 4 x 4 groups");

  __shared__ __align__(16) float As[2][BK][BM + PAD];  // As[k][m] = x[m0 + m, k0 + k]
  __shared__ __align__(16) float Bs[2][BK][BN + PAD];  // Bs[k][n] = W[n0 + n, k0 + k]

  const int tid = threadIdx.x;
  const int tx = tid % (BN / TN), ty = tid / (BN / TN);
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;

  float ra[LA], rb[LB];
  auto fetch = [&](int k0) {
#pragma unroll
    for (int j = 0; j < LA; ++j) {
      const int i = tid + j * NT;
      const int r = i / BK, c = i % BK;
      const int gm = m0 + r, gk = k0 + c;
      ra[j] = (gm < M && gk < K) ? __ldg(X + (size_t)gm * K + gk) : 0.f;
    }
#pragma unroll
    for (int j = 0; j < LB; ++j) {
      const int i = tid + j * NT;
      const int r = i / BK, c = i % BK;
      const int gn = n0 + r, gk = k0 + c;
      rb[j] = (gn < N && gk < K) ? __ldg(W + (size_t)gn * K + gk) : 0.f;
    }
  };
  auto stash = [&](int buf) {
#pragma unroll
    for (int j = 0; j < LA; ++j) {
      const int i = tid + j * NT;
      As[buf][i % BK][i / BK] = ra[j];
    }
#pragma unroll
    for (int j = 0; j < LB; ++j) {
      const int i = tid + j * NT;
      Bs[buf][i % BK][i / BK] = rb[j];
    }
  };

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;

  const int ktiles = (K + BK - 1) / BK;
  if (ktiles > 0) {
    fetch(0);
    stash(0);
  }
  __syncthreads();
  for (int kt = 0; kt < ktiles; ++kt) {
    const int cur = kt & 1;
    const bool more = kt + 1 < ktiles;
    if (more) fetch((kt + 1) * BK);  // global loads in flight during the math below
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float a[TM], b[TN];
#pragma unroll
      for (int s = 0; s < TM / 4; ++s) {
        const float4 v = *reinterpret_cast<const float4*>(&As[cur][k][s * SUBM + ty * 4]);
        a[s * 4 + 0] = v.x; a[s * 4 + 1] = v.y; a[s * 4 + 2] = v.z; a[s * 4 + 3] = v.w;
      }
#pragma unroll
      for (int s = 0; s < TN / 4; ++s) {
        const float4 v = *reinterpret_cast<const float4*>(&Bs[cur][k][s * SUBN + tx * 4]);
        b[s * 4 + 0] = v.x; b[s * 4 + 1] = v.y; b[s * 4 + 2] = v.z; b[s * 4 + 3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    // the other buffer was last read in iteration kt - 1, which every thread has finished
    if (more) stash(cur ^ 1);
    __syncthreads();
  }

  // epilogue: y = relu(acc + b[n]); the bias of a thread's columns is loaded once
  float bv[TN];
#pragma unroll
  for (int t = 0; t < TN / 4; ++t)
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int n = n0 + t * SUBN + tx * 4 + q;
      bv[t * 4 + q] = n < N ? __ldg(bias + n) : 0.f;
    }
#pragma unroll
  for (int s = 0; s < TM / 4; ++s) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int m = m0 + s * SUBM + ty * 4 + i;
      if (m >= M) continue;
      float* yrow = Y + (size_t)m * N;
#pragma unroll
      for (int t = 0; t < TN / 4; ++t) {
        const int n = n0 + t * SUBN + tx * 4;
        const float* v = &acc[s * 4 + i][t * 4];
        const float* c = &bv[t * 4];
        const float o0 = fmaxf(v[0] + c[0], 0.f), o1 = fmaxf(v[1] + c[1], 0.f);
        const float o2 = fmaxf(v[2] + c[2], 0.f), o3 = fmaxf(v[3] + c[3], 0.f);
        if (vec_store && n + 3 < N) {
          *reinterpret_cast<float4*>(yrow + n) = make_float4(o0, o1, o2, o3);
        } else {
          if (n + 0 < N) yrow[n + 0] = o0;
          if (n + 1 < N) yrow[n + 1] = o1;
          if (n + 2 < N) yrow[n + 2] = o2;
          if (n + 3 < N) yrow[n + 3] = o3;
        }
      }
    }
  }
}

template <int BM, int BN, int BK, int TM, int TN>
static void launch(const float* x, const float* w, const float* b, float* y, int M, int N, int K, bool vec,
                   cudaStream_t stream) {
  const dim3 grid((unsigned)((N + BN - 1) / BN), (unsigned)((M + BM - 1) / BM));
  linear_relu_kernel<BM, BN, BK, TM, TN><<<grid, (BM / TM) * (BN / TN), 0, stream>>>(x, w, b, y, M, N, K, vec);
}

// returns 0 on success, -1 for sizes out of range
extern "C" int linear_relu_launch(const float* x, const float* w, const float* b, float* y, int64_t M, int64_t K,
                                  int64_t N, cudaStream_t stream) {
  if (M <= 0 || N <= 0) return 0;
  if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX || K < 0) return -1;
  if ((M + 63) / 64 > 65535) return -1;  // grid.y
  int device = 0, sms = 132;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  const bool vec = N % 4 == 0 && (reinterpret_cast<uintptr_t>(y) & 15) == 0;
  // the small tiles are kept for outputs too small to fill the SMs with the large ones
  const int64_t big_tiles = ((M + 127) / 128) * ((N + 63) / 64);
  if (2 * big_tiles >= sms) launch<128, 64, 16, 8, 4>(x, w, b, y, (int)M, (int)N, (int)K, vec, stream);
  else launch<64, 64, 16, 4, 4>(x, w, b, y, (int)M, (int)N, (int)K, vec, stream);
  return 0;
}
