// Sum over one dimension of a contiguous tensor viewed as [outer, R, inner].
//  * inner == 1 (the last dimension): one vectorised reduction per row.
//  * otherwise: each OpenMP task owns a chunk of at most 512 output columns of one outer
//    index and streams the R input rows through it (contiguous, vectorised adds in L1).
#include <algorithm>
#include <cstdint>

extern "C" void sum_dim_kernel(const float* x, float* y, int64_t outer, int64_t R, int64_t inner) {
  if (inner == 1) {
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < outer; ++o) {
      const float* __restrict__ xr = x + o * R;
      float s = 0.f;
#pragma omp simd reduction(+ : s)
      for (int64_t r = 0; r < R; ++r) s += xr[r];
      y[o] = s;
    }
    return;
  }
  const int64_t CH = 512;
  const int64_t chunks = (inner + CH - 1) / CH;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t ch = 0; ch < chunks; ++ch) {
      const int64_t c0 = ch * CH;
      const int64_t n = std::min(CH, inner - c0);
      float acc[CH];
      for (int64_t j = 0; j < n; ++j) acc[j] = 0.f;
      const float* __restrict__ base = x + o * R * inner + c0;
      for (int64_t r = 0; r < R; ++r) {
        const float* __restrict__ row = base + r * inner;
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) acc[j] += row[j];
      }
      float* __restrict__ out = y + o * inner + c0;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) out[j] = acc[j];
    }
  }
}
