// LayerNorm over the last dimension: one row per OpenMP iteration; the row (a few KB) stays
// in L1 across the three vectorised sweeps (mean, variance around the mean, normalise).
#include <cmath>
#include <cstdint>

extern "C" void layernorm_rows(const float* x, const float* w, const float* b, float* y,
                               int64_t rows, int64_t cols, float eps) {
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
