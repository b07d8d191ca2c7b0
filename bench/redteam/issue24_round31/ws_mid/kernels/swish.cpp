#include <cmath>
#include <cstdint>

extern "C" void swish_kernel(const float* x, float* y, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i];
    y[i] = v / (1.0f + std::exp(-v));
  }
}
