// Pre-norm MLP block: y = x + fc2(gelu(fc1(layer_norm(x)))), in three passes:
//  1. layer_norm_rows: xn = LN(x) (one row per OpenMP iteration, vectorised sweeps in L1);
//  2. linear_fused(xn, W1, b1) with bias + exact GELU fused into the GEMM's store: h;
//  3. linear_fused(h, W2, b2, residual = x) with bias + residual fused into the store: y.
// The GEMM packs W [N, K] into K x 48 column panels (zero-padded past N) and runs an 8 x 48
// register-blocked micro-kernel (24 vector accumulators); OpenMP splits (panel, row-block)
// tiles, each thread walking one panel across row blocks so it stays in L2.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>

typedef float v16 __attribute__((vector_size(64)));

static inline v16 load16(const float* p) {
  v16 v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
static inline void store16(float* p, v16 v) { __builtin_memcpy(p, &v, sizeof v); }

constexpr int64_t MR = 8;
constexpr int64_t NR = 48;
constexpr int NV = NR / 16;

// exp(x) for x <= 0 (Cephes polynomial): plain arithmetic so callers' loops vectorise
static inline float exp_neg(float x) {
  x = x < -87.0f ? -87.0f : x;
  float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest
  float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float e = p * r * r + r + 1.0f;
  int32_t bits = ((int32_t)n + 127) << 23;
  return e * __builtin_bit_cast(float, bits);
}

// exact GELU through erf (Abramowitz-Stegun 7.1.26, |error| < 1.5e-7)
static inline float gelu_erf(float v) {
  const float z = v * 0.70710678118654752f;
  const float az = std::fabs(z);
  const float t = 1.0f / (1.0f + 0.3275911f * az);
  float poly = 1.061405429f;
  poly = poly * t - 1.453152027f;
  poly = poly * t + 1.421413741f;
  poly = poly * t - 0.284496736f;
  poly = poly * t + 0.254829592f;
  const float erf_abs = 1.0f - poly * t * exp_neg(-az * az);
  return 0.5f * v * (1.0f + std::copysign(erf_abs, z));
}

extern "C" void layer_norm_rows(const float* x, const float* w, const float* b, float* y, int64_t rows,
                                int64_t cols, float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* __restrict__ xr = x + r * cols;
    float* __restrict__ yr = y + r * cols;
    float s = 0.f;
#pragma omp simd reduction(+ : s)
    for (int64_t c = 0; c < cols; ++c) s += xr[c];
    const float mean = s / (float)cols;
    float ss = 0.f;
#pragma omp simd reduction(+ : ss)
    for (int64_t c = 0; c < cols; ++c) {
      const float d = xr[c] - mean;
      ss += d * d;
    }
    const float rstd = 1.0f / std::sqrt(ss / (float)cols + eps);
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) yr[c] = (xr[c] - mean) * rstd * w[c] + b[c];
  }
}

// Bp[jp][k][j] = W[jp * NR + j][k], zero where jp * NR + j >= N
static void pack_panels(const float* W, float* Bp, int64_t N, int64_t K) {
  const int64_t np = (N + NR - 1) / NR;
#pragma omp parallel for schedule(static)
  for (int64_t jp = 0; jp < np; ++jp) {
    float* dst = Bp + jp * K * NR;
    for (int64_t k0 = 0; k0 < K; k0 += 64) {
      const int64_t k1 = std::min(K, k0 + 64);
      for (int64_t j = 0; j < NR; ++j) {
        const int64_t n = jp * NR + j;
        if (n < N) {
          const float* src = W + n * K;
          for (int64_t k = k0; k < k1; ++k) dst[k * NR + j] = src[k];
        } else {
          for (int64_t k = k0; k < k1; ++k) dst[k * NR + j] = 0.f;
        }
      }
    }
  }
}

// tile[MR][NR] = rows a[0..MR) (each K long) times the panel bp (K x NR)
static inline void micro_kernel(int64_t K, const float* const* a, const float* bp, float* tile) {
  v16 c[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int q = 0; q < NV; ++q) c[r][q] = (v16){};
  for (int64_t k = 0; k < K; ++k) {
    v16 bv[NV];
#pragma GCC unroll 4
    for (int q = 0; q < NV; ++q) bv[q] = load16(bp + k * NR + 16 * q);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const float av = a[r][k];
#pragma GCC unroll 4
      for (int q = 0; q < NV; ++q) c[r][q] += av * bv[q];
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 4
    for (int q = 0; q < NV; ++q) store16(tile + r * NR + 16 * q, c[r][q]);
  }
}

// y = a @ W^T + bias, then: act 1 = exact GELU (residual unused), act 0 = + residual when non-null
extern "C" void linear_fused(const float* a, const float* W, const float* bias, const float* residual, float* y,
                             int64_t M, int64_t K, int64_t N, int act) {
  const int64_t np = (N + NR - 1) / NR;
  const int64_t mb = (M + MR - 1) / MR;
  std::unique_ptr<float[]> packed(new float[np * K * NR + 1]);
  float* Bp = packed.get();
  pack_panels(W, Bp, N, K);
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < np * mb; ++t) {
    const int64_t jp = t / mb, ib = t % mb;
    const int64_t i0 = ib * MR, j0 = jp * NR;
    const int64_t mr = std::min(MR, M - i0), nr = std::min(NR, N - j0);
    const float* arow[MR];
    for (int64_t r = 0; r < MR; ++r) arow[r] = a + std::min(i0 + r, M - 1) * K;  // tail rows repeat the last
    alignas(64) float tile[MR * NR];
    micro_kernel(K, arow, Bp + jp * K * NR, tile);
    for (int64_t r = 0; r < mr; ++r) {
      float* __restrict__ yr = y + (i0 + r) * N + j0;
      const float* __restrict__ tr = tile + r * NR;
      const float* __restrict__ br = bias + j0;
      if (act == 1) {
#pragma omp simd
        for (int64_t j = 0; j < nr; ++j) yr[j] = gelu_erf(tr[j] + br[j]);
      } else if (residual) {
        const float* __restrict__ rr = residual + (i0 + r) * N + j0;
#pragma omp simd
        for (int64_t j = 0; j < nr; ++j) yr[j] = tr[j] + br[j] + rr[j];
      } else {
#pragma omp simd
        for (int64_t j = 0; j < nr; ++j) yr[j] = tr[j] + br[j];
      }
    }
  }
}
