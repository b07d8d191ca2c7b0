#include <cmath>
#include <cstdint>
#include <cstring>

#ifndef REPS
#define REPS 1
#endif
// vectorisable swish: exp(-v) = 2^t, t = -v*log2(e), split into integer and fraction, 2^f by a polynomial
static inline float fast_exp2(float t) {
  t = t < -126.f ? -126.f : (t > 126.f ? 126.f : t);
  float fi = std::floor(t);
  float f = t - fi;
  float p = 1.0f + f * (0.6931472f + f * (0.2402265f + f * (0.05550411f + f * (0.009618129f + f * 0.001333355f))));
  int32_t e = (int32_t)fi + 127;
  int32_t bits = e << 23;
  float s;
  std::memcpy(&s, &bits, 4);
  return p * s;
}
extern "C" void swish_kernel(const float* x, float* y, int64_t n) {
  for (int r = 0; r < REPS; ++r) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      float v = x[i];
      y[i] = v / (1.0f + fast_exp2(-v * 1.4426950f));
    }
  }
}
