// y = relu(conv2d(x, w, b)), stride 1, zero padding `pad`, square kernel KS.
//
// Direct convolution, vectorised along the output width:
//  1. x is copied once into a zero-padded buffer whose rows are wide enough for 32-wide output
//     chunks, so the inner loop has no bounds checks;
//  2. w is repacked as [Cout/8][Cin][KS][KS][8] so the 8 output channels of one tap sit together;
//  3. each OpenMP task owns (image, 8 output channels, output row): 16 vector accumulators
//     (8 channels x 32 columns) stay in registers across all Cin * KS * KS taps, 16 FMAs per
//     2 input loads and 8 weight broadcasts. Bias and ReLU are applied at the store.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>

typedef float v16 __attribute__((vector_size(64)));

static inline v16 load16(const float* p) {
  v16 v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
static inline void store16(float* p, v16 v) { __builtin_memcpy(p, &v, sizeof v); }

constexpr int64_t COG = 8;   // output channels per task
constexpr int64_t OWB = 32;  // output columns per chunk (two vectors)

extern "C" void conv2d_relu_kernel(const float* x, const float* w, const float* b, float* y, int64_t N,
                                   int64_t Cin, int64_t H, int64_t W, int64_t Cout, int64_t KS, int64_t pad) {
  const int64_t OH = H + 2 * pad - KS + 1, OW = W + 2 * pad - KS + 1;
  if (OH <= 0 || OW <= 0) return;
  const int64_t owc = (OW + OWB - 1) / OWB;     // column chunks per output row
  const int64_t Hp = H + 2 * pad;
  const int64_t Wp = owc * OWB + KS - 1;         // >= W + 2 * pad
  const int64_t ngroups = (Cout + COG - 1) / COG;

  std::unique_ptr<float[]> xp_buf(new float[N * Cin * Hp * Wp]);
  std::unique_ptr<float[]> wt_buf(new float[ngroups * Cin * KS * KS * COG]);
  float* xp = xp_buf.get();
  float* wt = wt_buf.get();

#pragma omp parallel
  {
#pragma omp for schedule(static) nowait
    for (int64_t plane = 0; plane < N * Cin; ++plane) {
      float* dst = xp + plane * Hp * Wp;
      const float* src = x + plane * H * W;
      std::memset(dst, 0, sizeof(float) * Hp * Wp);
      for (int64_t h = 0; h < H; ++h) std::memcpy(dst + (h + pad) * Wp + pad, src + h * W, sizeof(float) * W);
    }
#pragma omp for schedule(static)
    for (int64_t g = 0; g < ngroups; ++g) {
      for (int64_t ci = 0; ci < Cin; ++ci)
        for (int64_t kk = 0; kk < KS * KS; ++kk)
          for (int64_t j = 0; j < COG; ++j) {
            const int64_t co = g * COG + j;
            wt[((g * Cin + ci) * KS * KS + kk) * COG + j] = co < Cout ? w[(co * Cin + ci) * KS * KS + kk] : 0.f;
          }
    }
    // implicit barrier: both buffers are complete

#pragma omp for collapse(3) schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t g = 0; g < ngroups; ++g) {
        for (int64_t oh = 0; oh < OH; ++oh) {
          const int64_t nco = std::min(COG, Cout - g * COG);
          for (int64_t c = 0; c < owc; ++c) {
            const int64_t ow0 = c * OWB;
            v16 acc[COG][2];
#pragma GCC unroll 8
            for (int j = 0; j < COG; ++j) acc[j][0] = acc[j][1] = (v16){};
            for (int64_t ci = 0; ci < Cin; ++ci) {
              const float* xplane = xp + ((n * Cin + ci) * Hp + oh) * Wp + ow0;
              const float* wtap = wt + (g * Cin + ci) * KS * KS * COG;
              for (int64_t kh = 0; kh < KS; ++kh) {
                const float* xrow = xplane + kh * Wp;
                for (int64_t kw = 0; kw < KS; ++kw) {
                  const v16 x0 = load16(xrow + kw);
                  const v16 x1 = load16(xrow + kw + 16);
                  const float* wv = wtap + (kh * KS + kw) * COG;
#pragma GCC unroll 8
                  for (int j = 0; j < COG; ++j) {
                    acc[j][0] += wv[j] * x0;
                    acc[j][1] += wv[j] * x1;
                  }
                }
              }
            }
            const int64_t nw = std::min(OWB, OW - ow0);
            for (int64_t j = 0; j < nco; ++j) {
              const int64_t co = g * COG + j;
              alignas(64) float tmp[OWB];
              store16(tmp, acc[j][0]);
              store16(tmp + 16, acc[j][1]);
              float* __restrict__ out = y + ((n * Cout + co) * OH + oh) * OW + ow0;
              const float bias = b[co];
#pragma omp simd
              for (int64_t q = 0; q < nw; ++q) {
                const float v = tmp[q] + bias;
                out[q] = v > 0.f ? v : 0.f;
              }
            }
          }
        }
      }
    }
  }
}
