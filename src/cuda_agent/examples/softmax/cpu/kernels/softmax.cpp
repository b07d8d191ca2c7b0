// Row softmax: one row per OpenMP iteration, three vectorised sweeps over a row that stays
// in L1/L2 (max; exp written straight to the output while summing; scale).
#include <cmath>
#include <cstdint>

// exp(x) for x <= 0 (Cephes polynomial, ~1 ulp) in plain arithmetic, so the loop vectorises
// without -ffast-math: no libm calls, rounding by the 1.5*2^23 trick, 2^n built in the
// exponent bits.
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

extern "C" void softmax_rows(const float* x, float* y, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* __restrict__ xr = x + r * cols;
    float* __restrict__ yr = y + r * cols;
    float m = -INFINITY;
#pragma omp simd reduction(max : m)
    for (int64_t c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
    if (m == -INFINITY) {  // every entry -inf: torch gives NaN
      for (int64_t c = 0; c < cols; ++c) yr[c] = NAN;
      continue;
    }
    float s = 0.f;
#pragma omp simd reduction(+ : s)
    for (int64_t c = 0; c < cols; ++c) {
      float e = exp_neg(xr[c] - m);
      yr[c] = e;
      s += e;
    }
    float inv = 1.0f / s;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
  }
}
