// y = relu(x @ W^T + b): a register-blocked GEMM with the bias and ReLU fused into the store.
//
// W [N, K] is packed once per call into K x 48 column panels (zero-padded past N), so the
// micro-kernel streams one panel (three 16-float vectors per k) against 8 rows of x: 24 vector
// accumulators held in registers, 24 FMAs per 11 loads. OpenMP splits the (panel, row-block) tiles; each thread
// walks one panel across many row blocks, so the panel stays in L2.
#include <algorithm>
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

extern "C" void linear_relu_kernel(const float* x, const float* w, const float* b, float* y, int64_t M,
                                   int64_t K, int64_t N) {
  const int64_t np = (N + NR - 1) / NR;
  const int64_t mb = (M + MR - 1) / MR;
  std::unique_ptr<float[]> packed(new float[np * K * NR + 1]);
  float* Bp = packed.get();
  pack_panels(w, Bp, N, K);
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < np * mb; ++t) {
    const int64_t jp = t / mb, ib = t % mb;
    const int64_t i0 = ib * MR, j0 = jp * NR;
    const int64_t mr = std::min(MR, M - i0), nr = std::min(NR, N - j0);
    const float* a[MR];
    for (int64_t r = 0; r < MR; ++r) a[r] = x + std::min(i0 + r, M - 1) * K;  // tail rows repeat the last
    alignas(64) float tile[MR * NR];
    micro_kernel(K, a, Bp + jp * K * NR, tile);
    for (int64_t r = 0; r < mr; ++r) {
      float* __restrict__ yr = y + (i0 + r) * N + j0;
      const float* __restrict__ br = b + j0;
      const float* __restrict__ tr = tile + r * NR;
#pragma omp simd
      for (int64_t j = 0; j < nr; ++j) {
        const float v = tr[j] + br[j];
        yr[j] = v > 0.f ? v : 0.f;
      }
    }
  }
}
