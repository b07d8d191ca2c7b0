// Brute force of the 32-bit seed behind torch's CPU generator (at::mt19937 keeps only the seed's low 32 bits),
// from the first elements of an int draw `torch.randint(0, R, ...)` (element k = k-th 32-bit output % R).
// usage: mt_seed R v0 v1 v2 [from] [count]   prints every seed in [from, from+count) whose first 3 draws match
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
static inline uint32_t temper(uint32_t y){ y ^= y >> 11; y ^= (y << 7) & 0x9d2c5680u; y ^= (y << 15) & 0xefc60000u; return y ^ (y >> 18); }
static inline uint32_t twist(uint32_t a, uint32_t b, uint32_t m){ uint32_t y = (a & 0x80000000u) | (b & 0x7fffffffu); return m ^ (y >> 1) ^ ((b & 1u) ? 0x9908b0dfu : 0u); }
static void outputs(uint32_t s, uint32_t *o, int n){ uint32_t mt[400 + 8]; mt[0] = s;
  for (int i = 1; i < 397 + n + 1; i++) mt[i] = 1812433253u * (mt[i-1] ^ (mt[i-1] >> 30)) + i;
  for (int k = 0; k < n; k++) o[k] = temper(twist(mt[k], mt[k+1], mt[k+397])); }
int main(int argc, char **argv){
  uint32_t R = strtoul(argv[1],0,10), v0 = strtoul(argv[2],0,10), v1 = strtoul(argv[3],0,10), v2 = strtoul(argv[4],0,10);
  uint64_t from = argc > 5 ? strtoull(argv[5],0,10) : 0, count = argc > 6 ? strtoull(argv[6],0,10) : (1ull << 32);
  #define L 16
  for (uint64_t base = from; base < from + count; base += L) {
    uint32_t x[L], a0[L], a1[L];
    for (int l = 0; l < L; l++) { x[l] = (uint32_t)(base + l); a0[l] = x[l]; }
    for (uint32_t i = 1; i <= 397; i++) {
      for (int l = 0; l < L; l++) { x[l] = 1812433253u * (x[l] ^ (x[l] >> 30)) + i; if (i == 1) a1[l] = x[l]; }
    }
    for (int l = 0; l < L; l++) {
      uint32_t o0 = temper(twist(a0[l], a1[l], x[l]));
      if (o0 % R == v0) { uint32_t o[3]; outputs((uint32_t)(base + l), o, 3); if (o[1] % R == v1 && o[2] % R == v2) printf("%llu\n", (unsigned long long)(base + l)); }
    }
  }
  return 0;
}
